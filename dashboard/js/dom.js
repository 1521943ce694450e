// DOM helpers. Everything the server sends (names, payloads, errors, logs) is
// put into the page as text (textContent, setAttribute): never as HTML.

// h('a', {href: '/x', class: 'btn', on: {click: fn}}, 'text', child, ...)
// Strings and numbers become text nodes; null, undefined and false are skipped;
// arrays are flattened.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'on') {
      for (const [event, fn] of Object.entries(value)) el.addEventListener(event, fn);
    } else if (name === 'value' || name === 'checked' || name === 'disabled' || name === 'selected') {
      el[name] = value;
    } else {
      el.setAttribute(name, value === true ? '' : String(value));
    }
  }
  return append(el, ...children);
}

export function append(el, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// Replaces the children of `el`.
export function fill(el, ...children) {
  el.replaceChildren();
  return append(el, ...children);
}

const SVG = 'http://www.w3.org/2000/svg';
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs || {})) el.setAttribute(name, String(value));
  return append(el, ...children);
}

// A table: columns [{label, cell: row => node|string, class?}], rows.
export function table(caption, columns, rows, empty = 'Nothing here.') {
  if (rows.length === 0) return h('p', {class: 'empty'}, empty);
  return h('table', {},
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', {scope: 'col', class: c.class}, c.label)))),
    h('tbody', {}, rows.map((row) =>
      h('tr', {}, columns.map((c) => h('td', {class: c.class}, c.cell(row)))))));
}
