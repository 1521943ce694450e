// Charts as inline SVG built with DOM calls (no inline style: the CSP forbids
// it; colours come from classes in app.css).
import {h, svg} from './dom.js';

// Horizontal bars: [{label, value, cls}]. Labelled for screen readers.
export function bars(title, items) {
  const width = 420;
  const row = 26;
  const labelWidth = 150;
  const max = Math.max(1, ...items.map((i) => i.value));
  const height = row * items.length + 4;
  const summary = items.map((i) => i.label + ' ' + i.value).join(', ');
  return h('figure', {class: 'chart'},
    svg('svg', {viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': title + ': ' + summary},
      items.map((item, n) => {
        const y = n * row + 2;
        const w = Math.round((width - labelWidth - 60) * item.value / max);
        return svg('g', {},
          svg('text', {x: 0, y: y + 17, class: 'chart-label'}, item.label),
          svg('rect', {x: labelWidth, y, width: Math.max(w, 1), height: row - 6, class: 'bar ' + item.cls}),
          svg('text', {x: labelWidth + Math.max(w, 1) + 6, y: y + 17, class: 'chart-value'},
              String(item.value)));
      })),
    h('figcaption', {}, title));
}

// Lines over time: series [{label, cls, points: [{t, v}]}] sharing one time axis.
export function lines(title, series, unit) {
  const width = 420;
  const height = 120;
  const pad = 24;
  const all = series.flatMap((s) => s.points);
  const summary = series.map((s) => s.label + ' now ' +
    (s.points.length ? s.points[s.points.length - 1].v.toFixed(1) : '—') + ' ' + unit).join(', ');
  const children = [svg('line', {x1: pad, y1: height - pad, x2: width, y2: height - pad, class: 'axis'})];
  if (all.length >= 2) {
    const t0 = Math.min(...all.map((p) => p.t));
    const t1 = Math.max(...all.map((p) => p.t));
    const vmax = Math.max(1, ...all.map((p) => p.v));
    const x = (t) => pad + (width - pad) * (t1 === t0 ? 1 : (t - t0) / (t1 - t0));
    const y = (v) => height - pad - (height - 2 * pad) * v / vmax;
    children.push(svg('text', {x: 0, y: pad, class: 'chart-value'}, vmax.toFixed(vmax < 10 ? 1 : 0)));
    for (const s of series) {
      if (s.points.length < 2) continue;
      children.push(svg('polyline', {
        points: s.points.map((p) => x(p.t).toFixed(1) + ',' + y(p.v).toFixed(1)).join(' '),
        class: 'line ' + s.cls}));
    }
  } else {
    children.push(svg('text', {x: pad, y: height / 2, class: 'chart-label'},
                      'collecting samples…'));
  }
  return h('figure', {class: 'chart'},
    svg('svg', {viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': title + ': ' + summary},
        children),
    h('figcaption', {}, title, ' — ',
      series.map((s, n) => [n ? ', ' : '', h('span', {class: 'key ' + s.cls}, '■'), ' ', s.label])));
}
