// Browser test of the live dashboard of `ethstream demo --ui-addr`.
//
//   node dashboard.mjs URL SCREENSHOT_DIR
//
// Opens URL in Debian's chromium (headless, through playwright-core: no
// browser download), waits for the demo's shrink_state phase to finish and
// asserts, from the page itself, that batch ids continue across the starts,
// the tombstone of s3_backfill is listed, the REPARTITION batch is marked on
// every chart and every chart holds one point per batch; that the page works
// from the keyboard, the runs list and the per-batch page, and at phone width.
// Saves dashboard.png (1280x800), dashboard-batch.png (a batch's page) and
// dashboard-phone.png (390x844, at the charts) to SCREENSHOT_DIR. Exits non-zero on the
// first failed assertion, printing what the page showed.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const [url, outDir] = process.argv.slice(2);
if (!url || !outDir) {
  console.error('usage: node dashboard.mjs URL SCREENSHOT_DIR');
  process.exit(2);
}
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
const timeoutMs = Number(process.env.E2E_TIMEOUT_MS || 240000);

let failures = 0;
function check(cond, what, detail) {
  if (cond) {
    console.log('ok   ' + what);
  } else {
    failures++;
    console.log('FAIL ' + what + (detail === undefined ? '' : ': ' + JSON.stringify(detail)));
  }
}

const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ethstream-e2e-'));
let ctx;
try {
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-quic', '--no-first-run'],
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  const consoleErrors = [];
  page.on('console', m => { if (m.type() === 'error') consoleErrors.push(m.text()); });
  page.on('pageerror', e => consoleErrors.push(String(e)));
  await page.goto(url, { waitUntil: 'domcontentloaded' });

  // Live: the page shows phases as they run. Wait for the shrink to finish
  // and for the final verification lines.
  await page.waitForSelector('#phases li[data-phase="shrink_state"][data-state="done"]', { timeout: timeoutMs });
  await page.waitForSelector('#demo-result.passed', { timeout: timeoutMs });
  await page.waitForTimeout(300); // one more frame after the last event

  const seen = await page.evaluate(() => {
    const charts = [...document.querySelectorAll('figure.chart')].map(f => ({
      id: f.dataset.chart,
      title: f.querySelector('h3').textContent,
      points: [...f.querySelectorAll('g.batch')].map(g => Number(g.dataset.batchId)),
      controls: [...f.querySelectorAll('g.marker-control')].map(g => ({ id: Number(g.dataset.batchId), text: g.textContent })),
      restarts: [...f.querySelectorAll('g.marker-restart')].map(g => Number(g.dataset.batchId)),
      axisLabels: [...f.querySelectorAll('text.lbl')].map(t => t.textContent),
    }));
    const phases = [...document.querySelectorAll('#phases li')].map(li => ({
      name: li.dataset.phase, state: li.dataset.state,
      first: li.dataset.firstBatch === undefined ? null : Number(li.dataset.firstBatch),
      last: li.dataset.lastBatch === undefined ? null : Number(li.dataset.lastBatch),
      code: (li.querySelector('.ph-code') || {}).textContent || '',
    }));
    const tombstones = [...document.querySelectorAll('#tombstones tbody tr[data-source]')].map(tr => ({
      name: tr.dataset.source, removedInBatch: Number(tr.dataset.removedInBatch), text: tr.textContent,
    }));
    const controls = [...document.querySelectorAll('#controls tbody tr[data-batch-id]')].map(tr => tr.textContent);
    const sources = [...document.querySelectorAll('#sources-table tbody tr[data-source]')].map(tr => ({ name: tr.dataset.source, cls: tr.className }));
    const checks = [...document.querySelectorAll('#checks li')].map(li => li.dataset.result);
    return {
      charts, phases, tombstones, controls, sources, checks,
      batches: Number(document.body.dataset.batches),
      status: document.getElementById('status').textContent,
      queryId: document.getElementById('q-id').textContent,
      partitions: document.getElementById('q-parts').textContent,
    };
  });

  // Batch ids continue: every chart's points are 0..N-1 in order, and each
  // phase with batches starts right after the previous one ended.
  const n = seen.batches;
  const want = Array.from({ length: n }, (_, i) => i);
  check(n > 0, 'the page shows batches', n);
  check(seen.charts.length === 6, 'six charts', seen.charts.map(c => c.id));
  for (const c of seen.charts) {
    check(JSON.stringify(c.points) === JSON.stringify(want), `chart ${c.id}: one point per batch, ids 0..${n - 1} in order`, c.points);
    check(c.controls.length === 1 && /REPARTITION 200→8/.test(c.controls[0].text), `chart ${c.id}: the REPARTITION batch is marked`, c.controls);
    check(c.restarts.length === 3, `chart ${c.id}: three restarts marked`, c.restarts);
    check(c.axisLabels.length === 2 && c.axisLabels.includes('batch id') && c.axisLabels.every(t => t.trim() !== ''), `chart ${c.id}: both axes labelled with units`, c.axisLabels);
  }
  const ran = seen.phases.filter(p => p.first !== null);
  check(ran.map(p => p.name).join() === 'backfill,add_live,retire_archive,shrink_state', 'phases with batches', ran);
  check(ran.length > 0 && ran[0].first === 0, 'the first batch is 0', ran[0]);
  for (let i = 1; i < ran.length; i++) {
    check(ran[i].first === ran[i - 1].last + 1, `${ran[i].name} continues at batch ${ran[i - 1].last + 1}`, ran[i]);
  }
  check(ran.length > 0 && ran[ran.length - 1].last === n - 1, 'the phases cover every batch', ran);
  const reorgs = seen.phases.find(p => p.name === 'live_reorgs');
  check(reorgs && reorgs.state === 'done' && reorgs.first === null, 'live_reorgs (own checkpoint) done, none of its batches charted here', reorgs);
  const refused = seen.phases.find(p => p.name === 'reuse_refused');
  check(refused && refused.state === 'refused' && refused.code === 'STREAMING_QUERY_EVOLUTION_ERROR.TOMBSTONE_SOURCE_NAME_REUSE',
    'reuse_refused shows its error code', refused);

  // The tombstone: removed in the retire phase's first batch.
  const retire = seen.phases.find(p => p.name === 'retire_archive');
  const tomb = seen.tombstones.find(t => t.name === 's3_backfill');
  check(tomb && retire && tomb.removedInBatch === retire.first, 'tombstone of s3_backfill listed with removedInBatch = first retire batch', { tomb, retire });
  check(seen.sources.some(s => s.name === 's3_backfill' && s.cls === 'removed') && seen.sources.some(s => s.name === 'eth_live'),
    'sources table: eth_live active, s3_backfill removed', seen.sources);

  // The control batch: first batch of the shrink phase, 200 -> 8 partitions.
  const shrink = seen.phases.find(p => p.name === 'shrink_state');
  for (const c of seen.charts) {
    check(c.controls.length === 1 && c.controls[0].id === shrink.first, `chart ${c.id}: REPARTITION at batch ${shrink.first}`, c.controls);
  }
  check(seen.controls.some(t => t.includes('REPARTITION')), 'offset log lists the control batch', seen.controls);
  check(seen.partitions === '8', 'header shows 8 state partitions after the shrink', seen.partitions);
  check(seen.checks.length > 0 && !seen.checks.includes('fail'), 'verification lines shown, none failed', seen.checks);
  check(/^[0-9a-f-]{36}$/.test(seen.queryId), 'header shows the query id', seen.queryId);

  // Keyboard: Tab reaches a chart, arrows move the readout batch by batch.
  await page.focus('#chart-rate svg.plot');
  await page.keyboard.press('Home');
  const r0 = await page.textContent('#chart-rate-r');
  await page.keyboard.press('ArrowRight');
  const r1 = await page.textContent('#chart-rate-r');
  check(/^Batch 0\b/.test(r0) && /^Batch 1\b/.test(r1), 'keyboard: Home and → step through batches', [r0, r1]);
  await page.keyboard.press('End');
  check((await page.textContent('#chart-rate-r')).startsWith('Batch ' + (n - 1)), 'keyboard: End reads the last batch');
  await page.evaluate(() => document.activeElement.blur());

  check(consoleErrors.length === 0, 'no script errors', consoleErrors);

  // The runs list: one row per start that ran batches, in order.
  const runs = await page.$$eval('#runs-table tbody tr[data-run-id]', trs => trs.map(tr => tr.textContent));
  check(runs.length === 4 && runs.every((t, i) => t.startsWith(String(i + 1))), 'runs list: the four starts with batches, in order', runs);

  fs.mkdirSync(outDir, { recursive: true });
  await page.evaluate(() => window.scrollTo(0, 0));
  // Freshness (head to table) of the live batches, in the header.
  const fresh = await page.evaluate(() => {
    const dd = document.getElementById('q-fresh');
    return { text: dd.textContent, last: dd.getAttribute('data-last'), median: dd.getAttribute('data-median') };
  });
  check(/^\d+ ms \(median \d+ ms\)$/.test(fresh.text) && Number(fresh.median) >= 0,
    'header: freshness of the live batches (last and median)', fresh);
  await page.screenshot({ path: path.join(outDir, 'dashboard.png') });

  // The per-batch page (as Spark's UI has): the control batch, then a data batch.
  const openBatch = async id => {
    await page.evaluate(id => { location.hash = '#batch-' + id; }, id);
    await page.waitForSelector(`body[data-batch-detail="${id}"]`, { timeout: 20000 });
    return page.evaluate(() => ({
      facts: document.getElementById('batch-facts').textContent,
      durations: document.getElementById('batch-durations').textContent,
      sink: document.getElementById('batch-sink').textContent,
      sources: [...document.querySelectorAll('#batch-sources tbody tr[data-source]')].map(tr => ({ name: tr.dataset.source, text: tr.textContent })),
      operators: [...document.querySelectorAll('#batch-operators tbody tr')].map(tr => tr.textContent),
    }));
  };
  const ctl = await openBatch(shrink.first);
  check(ctl.facts.includes('control batch (REPARTITION)') && ctl.durations.includes('controlBatch.REPARTITION'),
    `batch page ${shrink.first}: the control batch and its REPARTITION duration`, ctl);
  const det = await openBatch(shrink.first + 1);
  check(det.facts.includes('data') && det.durations.includes('addBatch') && det.durations.includes('triggerExecution'),
    `batch page ${shrink.first + 1}: a data batch with its durations`, det);
  check(det.sources.length === 1 && det.sources[0].name === 'eth_live' && det.sources[0].text.includes('"block"'),
    'batch page: eth_live with its start and end offsets', det.sources);
  check(det.operators.length === 1 && det.operators[0].includes('8'), 'batch page: the state operator at 8 partitions', det.operators);
  check(det.sink.includes('numOutputRows') && det.sink.includes('tableVersion'), 'batch page: the sink metrics', det.sink);
  await page.screenshot({ path: path.join(outDir, 'dashboard-batch.png') });

  // Phone width: nothing wider than the screen (tables scroll inside).
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(400);
  const overflow = await page.evaluate(() => ({
    width: document.documentElement.scrollWidth,
    wider: [...document.querySelectorAll('body *')]
      .filter(e => e.getBoundingClientRect().right > 391 && !(e.parentElement && e.parentElement.closest('.table-wrap')))
      .slice(0, 5).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && e.className.baseVal === undefined ? '.' + e.className : '')),
  }));
  check(overflow.width <= 390, 'phone width: no horizontal scrolling of the page', overflow);
  await page.evaluate(() => { location.hash = '#charts'; document.getElementById('charts').scrollIntoView(); });
  await page.waitForTimeout(200);
  await page.screenshot({ path: path.join(outDir, 'dashboard-phone.png') });
} catch (e) {
  failures++;
  console.log('FAIL ' + (e && e.stack ? e.stack : e));
} finally {
  if (ctx) await ctx.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
console.log(failures === 0 ? 'dashboard e2e: all assertions passed' : `dashboard e2e: ${failures} assertion(s) failed`);
process.exit(failures === 0 ? 0 : 1);
