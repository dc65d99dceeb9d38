package ui

// The one visual language of the dashboard and the demo's charts (SVG and
// PNG): a source keeps one colour everywhere, and so does a state partition
// count, both from the Okabe-Ito palette (safe for the common colour vision
// deficiencies). Colours go by order of first appearance in the batches: the
// first source named in a batch's input is SourceColors[0], the first
// partition count in force is PartitionColors[0]. static/app.js holds the
// same lists (SOURCE_STYLES, PARTITION_COLORS); a test keeps them equal.

// SourceColors are the colours of the sources, in order of first appearance.
var SourceColors = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"}

// PartitionColors are the colours of the state partition counts, in order of
// first use. They differ from the first two sources' and from the control
// batch's vermillion, so a chart that shows both never confuses them.
var PartitionColors = []string{"#009E73", "#CC79A7", "#56B4E9", "#000000"}

// ControlColor marks a control batch (REPARTITION) on every chart.
const ControlColor = "#D55E00"
