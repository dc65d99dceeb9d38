// ethstream dashboard: renders /api/events (server-sent events) into the
// page. Charts are inline SVG drawn here from the batch points, so they
// follow the page's width, stay crisp, can be read with the keyboard and
// carry their own text alternative. No third-party code.
'use strict';

const SVGNS = 'http://www.w3.org/2000/svg';

// Okabe-Ito palette.
const OI = {
  black: '#000000', orange: '#E69F00', sky: '#56B4E9', green: '#009E73',
  yellow: '#F0E442', blue: '#0072B2', vermillion: '#D55E00', purple: '#CC79A7', grey: '#999999',
};
// Colours go by order of first appearance; ui/palette.go has the same lists
// for the demo's charts (a test keeps them equal).
const PARTITION_COLORS = ['#009E73', '#CC79A7', '#56B4E9', '#000000'];
const SOURCE_STYLES = [
  { color: OI.blue, dash: '', shape: 'circle' },
  { color: OI.orange, dash: '6 3', shape: 'square' },
  { color: OI.green, dash: '2 2', shape: 'triangle' },
  { color: OI.purple, dash: '8 3 2 3', shape: 'diamond' },
  { color: OI.sky, dash: '', shape: 'square' },
  { color: OI.vermillion, dash: '4 2', shape: 'circle' },
];
// Duration segments in stacking order (ui.Segments), with the names users know.
const SEGMENTS = [
  ['latestOffset', 'latestOffset', OI.sky],
  ['walCommit', 'walCommit', OI.orange],
  ['getBatch', 'getBatch (read sources)', OI.green],
  ['operator', 'aggregation + other', OI.blue],
  ['stateCommit', 'state commit', OI.purple],
  ['deltaCommit', 'Delta commit (MERGE)', OI.yellow],
  ['commitOffsets', 'commitOffsets', OI.grey],
  ['repartition', 'REPARTITION', OI.vermillion],
];

let state = null; // the snapshot, kept current by the events
const charts = [];

// ---------- formatting ----------

function fmtNum(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(a >= 1e10 ? 0 : 1) + 'G';
  if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + 'M';
  if (a >= 1e4) return (v / 1e3).toFixed(0) + 'k';
  if (a >= 1e3) return (v / 1e3).toFixed(1) + 'k';
  if (a >= 100 || Number.isInteger(v)) return String(Math.round(v));
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

// durationUnit picks the unit for a set of millisecond values.
function durationUnit(maxMs) {
  const units = [['days', 86400000], ['hours', 3600000], ['minutes', 60000], ['seconds', 1000]];
  for (const [name, ms] of units) if (maxMs >= 2 * ms) return { name, ms };
  return { name: 'ms', ms: 1 };
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v; else if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}

function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k) e.append(k);
  return e;
}

function shape(kind, x, y, r, color, filled) {
  const common = { fill: filled ? color : '#fff', stroke: color, 'stroke-width': 1.5 };
  switch (kind) {
    case 'square': return svg('rect', { x: x - r, y: y - r, width: 2 * r, height: 2 * r, ...common });
    case 'triangle': return svg('path', { d: `M${x},${y - r * 1.2}L${x + r * 1.1},${y + r * 0.9}L${x - r * 1.1},${y + r * 0.9}Z`, ...common });
    case 'diamond': return svg('path', { d: `M${x},${y - r * 1.3}L${x + r * 1.3},${y}L${x},${y + r * 1.3}L${x - r * 1.3},${y}Z`, ...common });
    default: return svg('circle', { cx: x, cy: y, r, ...common });
  }
}

// ---------- scales ----------

function niceStep(range, target) {
  const raw = range / Math.max(1, target);
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// yScale returns {map(v) -> px, ticks: [{v, label, y}]} for values vals.
function yScale(vals, log, top, bottom) {
  const finite = vals.filter(v => v !== null && v !== undefined && Number.isFinite(v));
  if (log) {
    const pos = finite.filter(v => v > 0);
    const lo = pos.length ? Math.pow(10, Math.floor(Math.log10(Math.min(...pos)))) : 1;
    let hi = pos.length ? Math.pow(10, Math.ceil(Math.log10(Math.max(...pos)))) : 10;
    if (hi <= lo) hi = lo * 10;
    // A log axis has no 0: a zero value (a no-data batch) sits on the x
    // axis itself, a step below the lowest decade, with no tick of its own.
    const zeroY = bottom, baseY = bottom - 14;
    const map = v => (v <= 0 ? zeroY : baseY - (Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) * (baseY - top));
    const ticks = [];
    const decades = Math.log10(hi) - Math.log10(lo);
    const every = decades > 6 ? 2 : 1;
    for (let e = Math.log10(lo); e <= Math.log10(hi) + 1e-9; e += every) {
      const v = Math.pow(10, e);
      ticks.push({ v, label: fmtNum(v), y: map(v) });
    }
    return { map, ticks };
  }
  let hi = finite.length ? Math.max(...finite) : 1;
  if (hi <= 0) hi = 1;
  const step = niceStep(hi, 4);
  hi = Math.ceil(hi / step) * step;
  const map = v => bottom - (Math.max(0, v) / hi) * (bottom - top);
  const ticks = [];
  for (let v = 0; v <= hi + step / 2; v += step) ticks.push({ v, label: fmtNum(v), y: map(v) });
  return { map, ticks };
}

// ---------- chart specs ----------

function sourceNames(batches) {
  const names = [];
  for (const b of batches) for (const n of Object.keys(b.sourceRows || {})) if (!names.includes(n)) names.push(n);
  return names;
}

// partitionColor is the colour of a state partition count: by order of
// first use in the batches of the query (state.batches), as in the demo's
// charts.
function partitionColor(n) {
  const seen = [];
  for (const b of (state && state.batches) || []) if (b.partitions && !seen.includes(b.partitions)) seen.push(b.partitions);
  const i = seen.indexOf(n);
  return PARTITION_COLORS[(i < 0 ? seen.length : i) % PARTITION_COLORS.length];
}

function chartSpecs(batches) {
  const names = sourceNames(batches);
  const delays = [];
  for (const b of batches) {
    if (b.watermarkDelayMs !== null) delays.push(b.watermarkDelayMs);
    if (b.eventDelayMs !== null) delays.push(b.eventDelayMs);
  }
  const du = durationUnit(delays.length ? Math.max(...delays) : 0);
  return [
    {
      id: 'rate', title: 'Input rate vs processing rate', unit: 'rows/s', log: true, type: 'line',
      series: [
        { label: 'input rate', color: OI.blue, dash: '', shape: 'circle', get: b => b.inputRate },
        { label: 'processing rate', color: OI.orange, dash: '6 3', shape: 'square', get: b => b.processRate },
      ],
    },
    {
      id: 'duration', title: 'Batch duration by phase', unit: 'ms', log: false, type: 'stack',
      series: SEGMENTS.map(([k, label, color]) => ({ label, color, get: b => (b.segments || {})[k] || 0 })),
      total: b => b.durationMs,
    },
    {
      id: 'rows', title: 'Rows in per source', unit: 'rows', log: true, type: 'line',
      series: names.map((n, i) => ({ label: n, ...SOURCE_STYLES[i % SOURCE_STYLES.length], get: b => (n in (b.sourceRows || {}) ? b.sourceRows[n] : null) })),
    },
    {
      id: 'state', title: 'State rows', unit: 'keys', log: false, type: 'line', bands: true,
      // Lines in black: the bands behind them carry the partition counts' colours.
      series: [{ label: 'state rows', color: OI.black, dash: '', shape: 'circle', get: b => b.stateRows }],
    },
    {
      id: 'memory', title: 'State memory', unit: 'MiB', log: false, type: 'line', bands: true,
      // A control batch reports no operator memory: a gap, not a drop to 0.
      series: [{ label: 'state memory', color: OI.black, dash: '', shape: 'diamond', get: b => (b.kind === 'repartition' ? null : b.stateMemoryBytes / 1048576) }],
    },
    {
      id: 'eventtime', title: 'Watermark and event-time delay behind batch time', unit: du.name, log: false, type: 'line',
      series: [
        { label: 'watermark delay', color: OI.vermillion, dash: '6 3', shape: 'square', get: b => (b.watermarkDelayMs === null ? null : b.watermarkDelayMs / du.ms) },
        { label: 'newest event delay', color: OI.blue, dash: '', shape: 'circle', get: b => (b.eventDelayMs === null ? null : b.eventDelayMs / du.ms) },
      ],
      extra: b => (b.watermark ? 'watermark ' + b.watermark : 'no watermark yet'),
    },
  ];
}

// ---------- chart rendering ----------

function batchLabel(b) {
  let s = 'Batch ' + b.batchId;
  if (b.phase) s += ' (' + b.phase + ')';
  s += ', ' + b.kind;
  if (b.control) s += ' ' + b.control.operation + ' ' + b.control.from + '→' + b.control.to;
  if (b.restart) s += ', first batch of run ' + b.run;
  return s;
}

function readoutText(spec, b) {
  const parts = spec.series.map(s => {
    const v = s.get(b);
    return s.label + ': ' + (v === null || v === undefined ? '–' : fmtNum(v) + ' ' + spec.unit);
  });
  if (spec.total) parts.push('total ' + fmtNum(spec.total(b)) + ' ms');
  if (spec.bands) parts.push(b.partitions + ' partitions');
  if (spec.extra) parts.push(spec.extra(b));
  return batchLabel(b) + ' — ' + parts.join('; ');
}

class Chart {
  constructor(spec) {
    this.id = spec.id;
    this.cursor = -1;
    this.fig = el('figure', { class: 'chart', id: 'chart-' + spec.id, 'data-chart': spec.id });
    this.h = el('h3', { id: 'chart-' + spec.id + '-h' });
    this.legend = el('ul', { class: 'legend', 'aria-label': 'Legend' });
    this.plot = svg('svg', { class: 'plot', tabindex: '0', role: 'img', 'aria-labelledby': 'chart-' + spec.id + '-h', 'aria-describedby': 'chart-' + spec.id + '-r' });
    // Not a live region until the user reads batch by batch: live updates
    // of six charts must not be announced on every batch.
    this.readout = el('p', { class: 'readout', id: 'chart-' + spec.id + '-r', 'aria-live': 'off' });
    this.details = el('details', {}, el('summary', { text: 'Values as a table' }));
    this.tableWrap = el('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Values' });
    this.details.append(this.tableWrap);
    this.details.addEventListener('toggle', () => this.renderTable());
    this.fig.append(this.h, this.legend, this.plot, this.readout, this.details);
    this.plot.addEventListener('keydown', e => this.key(e));
    this.plot.addEventListener('mousemove', e => this.hover(e));
    this.plot.addEventListener('focus', () => { if (this.cursor < 0 && this.batches && this.batches.length) this.setCursor(this.batches.length - 1); });
    this.plot.addEventListener('blur', () => this.readout.setAttribute('aria-live', 'off'));
  }

  key(e) {
    const n = this.batches ? this.batches.length : 0;
    if (!n) return;
    let c = this.cursor < 0 ? n - 1 : this.cursor;
    if (e.key === 'ArrowLeft') c = Math.max(0, c - 1);
    else if (e.key === 'ArrowRight') c = Math.min(n - 1, c + 1);
    else if (e.key === 'Home') c = 0;
    else if (e.key === 'End') c = n - 1;
    else return;
    e.preventDefault();
    this.readout.setAttribute('aria-live', 'polite');
    this.setCursor(c);
  }

  hover(e) {
    if (!this.geom) return;
    const r = this.plot.getBoundingClientRect();
    const x = (e.clientX - r.left) * (this.geom.width / r.width);
    const i = Math.floor((x - this.geom.left) / this.geom.step);
    if (i >= 0 && i < this.batches.length) this.setCursor(i);
  }

  setCursor(i) {
    this.cursor = i;
    const g = this.geom;
    if (this.cursorRect && g) {
      this.cursorRect.setAttribute('x', g.left + i * g.step);
      this.cursorRect.setAttribute('width', Math.max(1, g.step));
      this.cursorRect.setAttribute('visibility', 'visible');
    }
    this.say(readoutText(this.spec, this.batches[i]));
  }

  say(text) {
    if (this.readout.textContent !== text) this.readout.textContent = text;
  }

  render(spec, batches) {
    this.spec = spec;
    this.batches = batches;
    this.h.textContent = spec.title + ' (' + spec.unit + (spec.log ? ', log scale' : '') + ')';
    // Legend: colour plus line dash plus marker shape, never colour alone.
    this.legend.replaceChildren(...spec.series.map(s => {
      const icon = svg('svg', { width: 26, height: 12, 'aria-hidden': 'true' });
      if (spec.type === 'stack') icon.append(svg('rect', { x: 3, y: 1, width: 20, height: 10, fill: s.color, stroke: '#333', 'stroke-width': 0.6 }));
      else {
        icon.append(svg('line', { x1: 1, y1: 6, x2: 25, y2: 6, stroke: s.color, 'stroke-width': 2, 'stroke-dasharray': s.dash || null }));
        icon.append(shape(s.shape, 13, 6, 3.2, s.color, true));
      }
      return el('li', {}, icon, s.label);
    }));

    const width = Math.max(280, Math.round(this.fig.clientWidth - 12) || 560);
    const narrow = width < 420;
    const height = narrow ? 220 : 240;
    const left = narrow ? 46 : 58, right = 10, bottom = height - 34;
    const n = batches.length;
    const step = n ? (width - left - right) / n : 1;
    // Markers: restarts at the left edge of a run's first batch, control
    // batches through their middle. Labels are packed into as few rows as
    // keep them apart; the plot starts below the last row.
    const items = [];
    batches.forEach((b, i) => {
      if (b.restart) items.push({ kind: 'restart', b, x: left + i * step, label: '↻ ' + (b.phase || 'run ' + b.run) });
      if (b.control) items.push({ kind: 'control', b, x: left + (i + 0.5) * step, label: '⟲ ' + b.control.operation + ' ' + b.control.from + '→' + b.control.to });
    });
    const rowEnds = [];
    for (const it of items) {
      const w = it.label.length * 6.4 + 6;
      it.anchor = it.x + w > width - right ? 'end' : 'start';
      it.x0 = it.anchor === 'end' ? it.x - w : it.x;
      it.x1 = it.x0 + w;
      let row = rowEnds.findIndex(end => end + 4 <= it.x0);
      if (row < 0) { row = rowEnds.length; rowEnds.push(0); }
      rowEnds[row] = it.x1;
      it.row = row;
    }
    const top = 16 + 11 * Math.max(1, rowEnds.length);
    this.geom = { width, left, step };
    const root = this.plot;
    root.setAttribute('viewBox', `0 0 ${width} ${height}`);
    root.setAttribute('data-points', String(n));
    root.replaceChildren();
    const xc = i => left + (i + 0.5) * step;

    // Values and y scale.
    let vals = [];
    if (spec.type === 'stack') vals = batches.map(b => Math.max(spec.total(b), spec.series.reduce((a, s) => a + s.get(b), 0)));
    else for (const s of spec.series) for (const b of batches) vals.push(s.get(b));
    const ys = yScale(vals, spec.log, top, bottom);

    // Partition bands (state charts): one shaded span per partition count.
    if (spec.bands && n) {
      let start = 0;
      for (let i = 1; i <= n; i++) {
        if (i === n || batches[i].partitions !== batches[start].partitions) {
          const x0 = left + start * step, x1 = left + i * step;
          const color = partitionColor(batches[start].partitions);
          root.append(svg('rect', { class: 'band', x: x0, y: top, width: x1 - x0, height: bottom - top, fill: color, 'fill-opacity': 0.1, 'data-partitions': batches[start].partitions }));
          if (x1 - x0 > 40) root.append(svg('text', { class: 'band-label', x: x0 + 4, y: top + 11, fill: color, text: batches[start].partitions + ' partitions' }));
          start = i;
        }
      }
    }

    // Grid and y axis.
    const yAxis = svg('g', { class: 'axis' });
    for (const t of ys.ticks) {
      yAxis.append(svg('line', { class: 'grid-line', x1: left, x2: width - right, y1: t.y, y2: t.y }));
      yAxis.append(svg('text', { x: left - 5, y: t.y + 3.5, 'text-anchor': 'end', text: t.label }));
    }
    yAxis.append(svg('text', { class: 'lbl', transform: `translate(11 ${(top + bottom) / 2}) rotate(-90)`, 'text-anchor': 'middle', text: spec.unit + (spec.log ? ' (log)' : '') }));
    root.append(yAxis);

    // x axis: batch ids at a readable spacing.
    const xAxis = svg('g', { class: 'axis' });
    xAxis.append(svg('line', { x1: left, x2: width - right, y1: bottom, y2: bottom }));
    const every = Math.max(1, Math.ceil(n / Math.max(2, Math.floor((width - left) / 38))));
    for (let i = 0; i < n; i += every) {
      xAxis.append(svg('line', { x1: xc(i), x2: xc(i), y1: bottom, y2: bottom + 4 }));
      xAxis.append(svg('text', { x: xc(i), y: bottom + 15, 'text-anchor': 'middle', text: String(batches[i].batchId) }));
    }
    xAxis.append(svg('text', { class: 'lbl', x: (left + width - right) / 2, y: height - 3, 'text-anchor': 'middle', text: 'batch id' }));
    root.append(xAxis);

    // Lines first, then one group of marks per batch (the test counts them).
    if (spec.type === 'line') {
      for (const s of spec.series) {
        let d = '';
        let pen = false;
        batches.forEach((b, i) => {
          const v = s.get(b);
          // A log axis has no 0: a zero is a gap in the line, and its mark
          // (below) is hollow, on the axis, so it never reads as a value.
          if (v === null || v === undefined || !Number.isFinite(v) || (spec.log && v <= 0)) { pen = false; return; }
          d += (pen ? 'L' : 'M') + xc(i).toFixed(1) + ',' + ys.map(v).toFixed(1);
          pen = true;
        });
        if (d) root.append(svg('path', { d, fill: 'none', stroke: s.color, 'stroke-width': 2, 'stroke-dasharray': s.dash || null, 'stroke-linejoin': 'round' }));
      }
    }
    const marks = svg('g', { class: 'marks' });
    const r = Math.max(1.8, Math.min(3.6, step / 3));
    batches.forEach((b, i) => {
      const g = svg('g', { class: 'batch', 'data-batch-id': b.batchId, 'data-kind': b.kind });
      if (spec.type === 'stack') {
        let y = bottom;
        const w = Math.max(1, step * 0.78);
        for (const s of spec.series) {
          const v = s.get(b);
          if (!v) continue;
          const h = bottom - ys.map(v); // linear scale: map(0) is the baseline
          g.append(svg('rect', { x: xc(i) - w / 2, y: y - h, width: w, height: Math.max(0, h), fill: s.color, stroke: '#333', 'stroke-width': step > 6 ? 0.4 : 0 }));
          y -= h;
        }
        if (g.childNodes.length === 0) g.append(svg('rect', { x: xc(i) - w / 2, y: bottom - 1, width: w, height: 1, fill: '#999' }));
      } else {
        for (const s of spec.series) {
          const v = s.get(b);
          if (v === null || v === undefined || !Number.isFinite(v)) continue;
          const zero = spec.log && v <= 0;
          const m = shape(s.shape, xc(i), ys.map(v), zero ? r * 0.8 : r, s.color, !zero);
          if (zero) m.setAttribute('data-zero', 'true');
          g.append(m);
        }
      }
      marks.append(g);
    });
    root.append(marks);

    const markers = svg('g', { class: 'markers' });
    for (const it of items) {
      const ly = 10 + it.row * 11;
      const g = svg('g', { class: 'marker-' + it.kind, 'data-batch-id': it.b.batchId });
      g.append(svg('title', { text: it.kind === 'control' ? 'control batch ' + it.b.batchId + ': ' + it.label.slice(2) : 'restart: run ' + it.b.run + ' starts at batch ' + it.b.batchId }));
      g.append(svg('line', { x1: it.x, x2: it.x, y1: ly + 2, y2: bottom }));
      g.append(svg('text', { x: it.anchor === 'end' ? it.x - 3 : it.x + 3, y: ly, 'text-anchor': it.anchor, text: it.label }));
      markers.append(g);
    }
    root.append(markers);

    this.cursorRect = svg('rect', { class: 'cursor', x: 0, y: top, width: 1, height: bottom - top, visibility: 'hidden', 'pointer-events': 'none' });
    root.append(this.cursorRect);
    if (this.cursor >= n) this.cursor = -1;
    if (this.cursor >= 0) this.setCursor(this.cursor);
    else if (n) this.say('Latest: ' + readoutText(spec, batches[n - 1]));
    else this.say('No batch yet.');
    root.setAttribute('aria-label', spec.title + ', ' + n + ' batches');
    if (this.details.open) this.renderTable();
  }

  renderTable() {
    if (!this.details.open || !this.spec) return;
    const spec = this.spec;
    const head = el('tr', {}, el('th', { scope: 'col', text: 'batch' }), el('th', { scope: 'col', text: 'kind' }),
      ...spec.series.map(s => el('th', { scope: 'col', class: 'num', text: s.label + ' (' + spec.unit + ')' })));
    const rows = this.batches.map(b => el('tr', {}, el('td', { class: 'num', text: String(b.batchId) }),
      el('td', { text: b.kind + (b.restart ? ', restart' : '') }),
      ...spec.series.map(s => { const v = s.get(b); return el('td', { class: 'num', text: v === null || v === undefined ? '–' : fmtNum(v) }); })));
    this.tableWrap.replaceChildren(el('table', {}, el('thead', {}, head), el('tbody', {}, ...rows)));
  }
}

// ---------- page sections ----------

function setText(id, v) { document.getElementById(id).textContent = v === undefined || v === null || v === '' ? '–' : String(v); }

// Freshness in the header: the newest batch's, then the median over the
// batches shown, of sources[].metrics.freshnessMs (head to table).
function renderFreshness(batches) {
  const xs = batches.filter(b => b.freshnessMs !== null && b.freshnessMs !== undefined).map(b => b.freshnessMs);
  const dd = document.getElementById('q-fresh');
  if (xs.length === 0) { setText('q-fresh', ''); dd.removeAttribute('data-last'); return; }
  const last = xs[xs.length - 1];
  const sorted = xs.slice().sort((a, b) => a - b);
  const median = sorted[Math.floor((sorted.length - 1) / 2)];
  setText('q-fresh', last + ' ms (median ' + median + ' ms)');
  dd.setAttribute('data-last', String(last));
  dd.setAttribute('data-median', String(median));
}

function renderHeader(q) {
  setText('q-name', q.name);
  setText('q-id', q.id);
  // The id alone in its cell, so it fits; which run it is goes in the label.
  setText('q-run', q.runId || '');
  setText('q-run-n', q.runs > 1 ? '(run ' + q.runs + ')' : '');
  setText('q-ckpt', q.checkpoint);
  for (const id of ['q-id', 'q-run', 'q-ckpt']) { const e = document.getElementById(id); e.title = e.textContent; } // cut to one line
  setText('q-parts', q.statePartitions || '');
  setText('q-trigger', q.trigger || (q.mode === 'ui' ? 'not recorded in the checkpoint' : ''));
  setText('q-batch', q.latestBatchId);
  setText('q-wm', q.watermark);
  const st = document.getElementById('status');
  st.className = 'status ' + q.status.state;
  st.textContent = q.status.state + (q.status.code ? ': ' + q.status.code : '');
  st.setAttribute('data-state', q.status.state);
  const msg = document.getElementById('q-status-msg');
  msg.hidden = !q.status.message;
  msg.textContent = q.status.message || '';
  const err = document.getElementById('q-error');
  err.hidden = !q.error;
  err.textContent = q.error || '';
  document.title = 'ethstream · ' + (q.name || 'dashboard') + ' · ' + q.status.state;
}

function range(a, b) {
  if (a === null || a === undefined) return 'no batch';
  return a === b ? 'batch ' + a : 'batches ' + a + '–' + b;
}

function renderDemo(dm) {
  for (const id of ['demo', 'nav-demo', 'verify', 'nav-verify']) document.getElementById(id).hidden = !dm;
  if (!dm) return;
  const labels = { pending: 'pending', running: '▶ running', done: '✓ done', refused: '⊘ refused, as expected', failed: '✕ failed' };
  document.getElementById('phases').replaceChildren(...dm.phases.map((p, i) => {
    const li = el('li', { class: 'phase', 'data-phase': p.name, 'data-state': p.state,
      'data-first-batch': p.firstBatch, 'data-last-batch': p.lastBatch, 'aria-current': p.state === 'running' ? 'step' : null });
    li.append(el('div', {}, el('span', { class: 'ph-name', text: (i + 1) + '. ' + p.name }), el('span', { class: 'ph-state', text: labels[p.state] || p.state })));
    const secs = p.durationMs ? ' · ' + (p.durationMs / 1000).toFixed(2) + ' s' : '';
    if (p.ownCheckpoint) {
      if (p.state !== 'pending') li.append(el('p', { class: 'ph-batches', text: p.starts + (p.starts === 1 ? ' start' : ' starts') + secs }));
      li.append(el('p', { class: 'muted', text: 'on a checkpoint and table of its own: not in the charts below' }));
    } else if (p.state !== 'pending' && p.state !== 'refused' && p.state !== 'failed') {
      li.append(el('p', { class: 'ph-batches', text: range(p.firstBatch, p.lastBatch) + secs }));
    }
    if (p.code) li.append(el('p', {}, el('code', { class: 'ph-code', text: p.code })));
    if (p.sources && p.sources.length) li.append(el('p', { class: 'muted', text: 'sources: ' + p.sources.join(', ') }));
    if (p.trigger) li.append(el('p', { class: 'muted', text: 'trigger: ' + p.trigger }));
    let msg = p.message || '';
    if (p.code && msg.startsWith(p.code + ': ')) msg = msg.slice(p.code.length + 2);
    if (msg) li.append(el('details', { class: 'ph-msg' }, el('summary', { text: 'error message' }), el('p', { text: msg })));
    return li;
  }));
  const res = document.getElementById('demo-result');
  res.className = 'result ' + (dm.result || '');
  res.textContent = dm.result === 'passed' ? '✓ all checks passed' : dm.result === 'failed' ? '✕ some checks failed' : dm.result === 'error' ? '✕ ' + (dm.error || 'error') : '';
  const tags = { pass: 'PASS', fail: 'FAIL', figure: '—' };
  // In check order (1., 2., ...), whatever order they were decided in;
  // the lines of one check keep theirs.
  const num = c => { const m = /^(\d+)\./.exec(c.name); return m ? Number(m[1]) : Infinity; };
  const checks = dm.checks.map((c, i) => [c, i]).sort((a, b) => num(a[0]) - num(b[0]) || a[1] - b[1]).map(x => x[0]);
  document.getElementById('checks').replaceChildren(...checks.map(c => el('li', { class: c.result, 'data-result': c.result },
    el('span', { class: 'tag', text: tags[c.result] || c.result }), ' ', c.name, ': ',
    el('span', { class: 'mono', text: c.actual }), c.result === 'fail' ? el('span', {}, ' (expected ', el('span', { class: 'mono', text: c.expected }), ')') : null)));
  const pass = dm.checks.filter(c => c.result === 'pass').length, fail = dm.checks.filter(c => c.result === 'fail').length;
  const done = dm.result === 'passed' || dm.result === 'failed' || dm.result === 'error';
  setText('checks-sum', !dm.checks.length ? (done ? 'none decided' : 'none decided yet')
    : pass + ' passed, ' + fail + ' failed' + (done ? ': final' : ' so far'));
}

function renderSources(list) {
  const tb = document.querySelector('#sources-table tbody');
  if (!list.length) { tb.replaceChildren(el('tr', {}, el('td', { colspan: 8, class: 'muted', text: 'No batch yet.' }))); return; }
  tb.replaceChildren(...list.map(s => {
    const removed = s.status === 'removed';
    let lagText = s.lag === null || s.lag === undefined ? (removed ? '' : 'n/a') : s.lag + ' ' + s.lagUnit;
    // A stopped source has no live lag: say when the figure was true.
    if (!removed && s.status !== 'active' && lagText !== 'n/a') lagText += ' at batch ' + s.lastBatchId;
    return el('tr', { class: removed ? 'removed' : '', 'data-source': s.name },
      el('th', { scope: 'row', text: s.name }), el('td', { text: s.provider || '' }),
      el('td', { text: removed ? 'removed in batch ' + s.removedInBatch : s.status + ' (batch ' + s.lastBatchId + ')' }),
      el('td', { class: 'mono', text: s.startOffset || '' }), el('td', { class: 'mono', text: s.endOffset || '' }),
      el('td', { class: 'mono', text: s.latestOffset || '' }), el('td', { class: 'num', text: removed ? '' : String(s.rowsLastBatch) }),
      el('td', { text: lagText + (s.pending ? ' · ' + s.pending : '') }));
  }));
}

// ---------- runs and the per-batch page ----------

// renderRuns lists the starts of the query, from the batches in view.
function renderRuns(batches) {
  const runs = [];
  for (const b of batches) {
    let r = runs[runs.length - 1];
    if (!r || r.runId !== b.runId) { r = { run: b.run, runId: b.runId, phase: b.phase || '', started: b.timestamp, n: 0, first: b.batchId, last: b.batchId, rows: 0 }; runs.push(r); }
    r.n++; r.last = b.batchId; r.rows += b.inputRows;
  }
  setText('runs-count', '(' + runs.length + ')');
  const tb = document.querySelector('#runs-table tbody');
  if (!runs.length) { tb.replaceChildren(el('tr', {}, el('td', { colspan: 7, class: 'muted', text: 'No batch yet.' }))); return; }
  // Phase names come from the demo; a checkpoint records none, so the
  // column is left out rather than shown empty.
  const phased = runs.some(r => r.phase);
  document.querySelector('#runs-table th.col-phase').hidden = !phased;
  tb.replaceChildren(...runs.map(r => el('tr', { 'data-run-id': r.runId },
    el('td', { class: 'num', text: String(r.run) }), el('td', { class: 'mono', text: r.runId }), phased ? el('td', { text: r.phase }) : null,
    el('td', { class: 'mono', text: r.started }), el('td', { class: 'num', text: String(r.n) }),
    el('td', {}, el('a', { href: '#batch-' + r.first, text: String(r.first) }), r.last !== r.first ? '–' : '',
      r.last !== r.first ? el('a', { href: '#batch-' + r.last, text: String(r.last) }) : ''),
    el('td', { class: 'num', text: String(r.rows) }))));
}

function kv(tbody, obj, empty) {
  const keys = Object.keys(obj || {}).sort();
  tbody.replaceChildren(...(keys.length ? keys.map(k => el('tr', {}, el('th', { scope: 'row', text: k }), el('td', { class: 'num mono', text: String(obj[k]) })))
    : [el('tr', {}, el('td', { colspan: 2, class: 'muted', text: empty }))]));
}

function rate(v) { return v === undefined || v === null ? null : Number(v).toFixed(1); }
function metricsText(m) { return Object.keys(m || {}).sort().map(k => k + '=' + m[k]).join(' · '); }
function offsetText(o) { return o === undefined || o === null ? 'null' : (typeof o === 'string' ? o : JSON.stringify(o)); }

// showBatch renders batch id's page from api/batch/<id> (the whole progress
// event, as Spark's UI shows a batch).
async function showBatch(id) {
  const sec = document.getElementById('batch');
  sec.hidden = false;
  document.body.setAttribute('data-batch-detail', 'loading');
  setText('batch-title', id);
  document.getElementById('batch-prev').href = '#batch-' + Math.max(0, id - 1);
  document.getElementById('batch-next').href = '#batch-' + (id + 1);
  const err = document.getElementById('batch-error');
  let p;
  try {
    const r = await fetch('api/batch/' + id, { cache: 'no-store' });
    if (!r.ok) throw new Error(await r.text());
    const page = await r.json();
    p = page.progress;
    p.kind = page.kind;
  } catch (e) {
    err.hidden = false; err.textContent = String(e.message || e).trim();
    for (const t of ['batch-durations', 'batch-sink', 'batch-sources', 'batch-operators']) document.querySelector('#' + t + ' tbody').replaceChildren();
    document.getElementById('batch-facts').replaceChildren();
    document.body.setAttribute('data-batch-detail', 'missing');
    sec.scrollIntoView();
    return;
  }
  err.hidden = true;
  const kind = p.kind === 'repartition' ? 'control batch (REPARTITION)' : p.kind;
  const fact = (k, v, mono) => el('div', {}, el('dt', { text: k }), el('dd', { class: mono ? 'mono' : '', text: v === undefined || v === null || v === '' ? '–' : String(v) }));
  document.getElementById('batch-facts').replaceChildren(
    fact('Batch id', p.batchId), fact('Kind', kind), fact('Timestamp', p.timestamp, true), fact('Run id', p.runId, true),
    fact('Rows in', p.numInputRows), fact('Input rate (rows/s)', rate(p.inputRowsPerSecond)), fact('Processing rate (rows/s)', rate(p.processedRowsPerSecond)),
    fact('Watermark', (p.eventTime || {}).watermark, true));
  kv(document.querySelector('#batch-durations tbody'), p.durationMs, 'none reported');
  const sink = Object.assign({ description: (p.sink || {}).description, numOutputRows: (p.sink || {}).numOutputRows }, (p.sink || {}).metrics || {});
  kv(document.querySelector('#batch-sink tbody'), sink, 'none reported');
  const srcs = p.sources || [];
  document.querySelector('#batch-sources tbody').replaceChildren(...(srcs.length ? srcs.map((s, i) => el('tr', { 'data-source': s.name || String(i) },
    el('th', { scope: 'row', text: s.name || s.description || String(i) }),
    el('td', { class: 'mono', text: offsetText(s.startOffset) }), el('td', { class: 'mono', text: offsetText(s.endOffset) }),
    el('td', { class: 'mono', text: offsetText(s.latestOffset) }), el('td', { class: 'num', text: String(s.numInputRows || 0) }),
    el('td', { class: 'mono', text: metricsText(s.metrics) })))
    : [el('tr', {}, el('td', { colspan: 6, class: 'muted', text: 'No source in this batch.' }))]));
  const ops = p.stateOperators || [];
  document.querySelector('#batch-operators tbody').replaceChildren(...(ops.length ? ops.map(o => el('tr', {},
    el('th', { scope: 'row', text: o.operatorName }), el('td', { class: 'num', text: String(o.numRowsTotal) }),
    el('td', { class: 'num', text: String(o.numRowsUpdated) }), el('td', { class: 'num', text: String(o.numRowsRemoved) }),
    el('td', { class: 'num', text: String(o.numShufflePartitions) }), el('td', { class: 'num', text: String(o.memoryUsedBytes) }),
    el('td', { class: 'num', text: String(o.commitTimeMs) }), el('td', { class: 'mono', text: metricsText(o.customMetrics) })))
    : [el('tr', {}, el('td', { colspan: 8, class: 'muted', text: 'No state operator in this batch.' }))]));
  document.body.setAttribute('data-batch-detail', String(p.batchId));
  sec.scrollIntoView();
}

function route() {
  const m = /^#batch-(\d+)$/.exec(location.hash);
  if (m) showBatch(Number(m[1]));
  else document.getElementById('batch').hidden = true;
}
window.addEventListener('hashchange', route);
document.getElementById('batch-form').addEventListener('submit', e => {
  e.preventDefault();
  location.hash = '#batch-' + document.getElementById('batch-id').value;
});

function renderLog(lg) {
  const sum = lg.retained.length
    ? lg.dir + ' holds batches ' + lg.retained[0] + '–' + lg.retained[1] + ' (older entries are purged by retention); latest committed: ' + (lg.latestCommitted === null ? 'none' : lg.latestCommitted)
    : lg.dir + ' has no entry yet.';
  setText('log-summary', sum);
  const le = document.getElementById('log-error');
  le.hidden = !lg.error;
  le.textContent = lg.error || '';
  const tt = document.querySelector('#tombstones tbody');
  tt.replaceChildren(...(lg.tombstones.length ? lg.tombstones.map(t => el('tr', { 'data-source': t.name, 'data-removed-in-batch': t.removedInBatch },
    el('th', { scope: 'row', text: t.name }), el('td', { class: 'num', text: String(t.removedInBatch) }), el('td', { class: 'mono', text: t.lastOffset })))
    : [el('tr', {}, el('td', { colspan: 3, class: 'muted', text: 'No source removed.' }))]));
  const ct = document.querySelector('#controls tbody');
  ct.replaceChildren(...(lg.controlBatches.length ? lg.controlBatches.map(c => el('tr', { 'data-batch-id': c.batchId },
    el('td', { class: 'num', text: String(c.batchId) }), el('td', { text: c.operation }), el('td', { class: 'num', text: String(c.from) }), el('td', { class: 'num', text: String(c.to) })))
    : [el('tr', {}, el('td', { colspan: 4, class: 'muted', text: 'No control batch in the retained log.' }))]));
  const box = document.getElementById('entries');
  const open = new Set([...box.querySelectorAll('details[open]')].map(d => d.dataset.batchId));
  const entries = lg.entries.slice().reverse();
  box.replaceChildren(...entries.map((e, i) => {
    const s = el('summary', {}, el('span', { class: 'mono', text: 'offsets/' + e.batchId }), ' · v' + e.version + ' · ' + e.sources.map(x => x.key + ' ' + x.offset).join(', '));
    if (e.control) s.append(el('span', { class: 'pill control', text: e.control.operation + ' ' + e.control.from + '→' + e.control.to }));
    for (const t of e.tombstones) s.append(el('span', { class: 'pill tomb', text: 'tombstone ' + t.name + ' @' + t.removedInBatch }));
    s.append(el('span', { class: e.committed ? 'pill' : 'pill pending', text: e.committed ? 'committed' : 'not committed' }));
    const d = el('details', { 'data-batch-id': e.batchId, open: open.has(String(e.batchId)) || (open.size === 0 && i === 0) ? '' : null }, s,
      el('pre', { text: e.raw }), e.commitRaw ? el('pre', { text: 'commits/' + e.batchId + '\n' + e.commitRaw }) : null);
    return d;
  }));
}

let pending = false;
function render() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    if (!state) return;
    renderHeader(state.query);
    renderFreshness(state.batches);
    renderDemo(state.demo);
    const specs = chartSpecs(state.batches);
    const grid = document.getElementById('chart-grid');
    // All figures first, so each measures its width in the final grid.
    specs.forEach((spec, i) => {
      if (!charts[i]) { charts[i] = new Chart(spec); grid.append(charts[i].fig); }
    });
    specs.forEach((spec, i) => charts[i].render(spec, state.batches));
    setText('batch-count', '(' + state.batches.length + ')');
    renderRuns(state.batches);
    renderSources(state.sources);
    renderLog(state.offsetLog);
    document.body.setAttribute('data-batches', String(state.batches.length));
  });
}

// ---------- live updates ----------

// The header's status is one word (the query's); the connection speaks
// only when it is not live.
function setConn(text, down) {
  const c = document.getElementById('conn');
  c.textContent = text === 'live' ? '' : text;
  c.className = 'conn' + (down ? ' down' : '');
  document.body.setAttribute('data-conn', down ? 'down' : text);
}

function connect() {
  const es = new EventSource('api/events');
  es.addEventListener('open', () => setConn('live', false));
  es.addEventListener('snapshot', e => { state = JSON.parse(e.data); render(); });
  es.addEventListener('batch', e => { if (state) { state.batches.push(JSON.parse(e.data)); render(); } });
  es.addEventListener('meta', e => { if (state) { Object.assign(state, JSON.parse(e.data)); render(); } });
  es.addEventListener('end', () => {
    es.close();
    setConn('the command has ended; this page keeps its last state (browse later with ethstream ui --checkpoint)', false);
    document.body.setAttribute('data-conn', 'ended');
  });
  es.addEventListener('error', () => { if (es.readyState !== EventSource.CLOSED) setConn('reconnecting…', true); });
}

// Re-draw when the charts' width changes (window, zoom, phone rotation).
let gridWidth = 0;
new ResizeObserver(entries => {
  const w = Math.round(entries[0].contentRect.width);
  if (w !== gridWidth) { gridWidth = w; render(); }
}).observe(document.getElementById('chart-grid'));
connect();
route();
