// The static edition (kvlab.book): draws every figure with the site's own plotly.js and brings the precomputed
// controls of a panel to life. All data is in the page (<script type="application/json">), so nothing is fetched.
// A panel's states were rendered by the live panel's own render function: moving one control shows the state of
// that value with every other control at its default (the page says so).
//
// Figures are made for a wide screen (their layout's width, kvlab.viz.style.WIDE px). On the page each one takes
// the width of its box (plotly's autosize, fitted again when the box's width changes, as when a phone is turned),
// down to MIN_WIDTH px, below which the box scrolls sideways instead of squeezing the text (book.css). A title too
// long for the width wraps. A figure narrower than STACK_BELOW of its design width (a phone), or than COLUMN_WIDTH
// px per column of subplots, is narrow: its side-by-side subplots go one above the other, each as tall as it was
// designed; its legend goes below the plot, across, an entry too long for the width wrapped; its axes' margins
// grow to hold their labels. Once drawn, a narrow figure is measured (rotated tick labels, wrapped titles, labels
// that run into each other or past an edge) and drawn again with the room it showed it needs. Only what plotly
// draws changes: the figure itself (``box.kvlabFigure``) stays as the course made it.
(function () {
  "use strict";
  const CONFIG = { displaylogo: false, responsive: true };
  const MIN_WIDTH = 320;
  const STACK_BELOW = 0.7;
  const COLUMN_WIDTH = 300;  // px: narrower side-by-side subplots go one above the other
  const DESIGN_WIDTH = 980;  // (a figure without a width of its own)
  const LINE = 1.3;  // a text line's height, in font sizes (plotly's line spacing)
  const OPEN = new Set("（「『《〈【〔([{“‘");
  const CLOSE = new Set("）」』》〉】〕)]}”’，。、：；！？,.:;!?%…·");

  function data(el) {
    return JSON.parse(el.querySelector(":scope > script[type='application/json']").textContent);
  }

  function figureOf(pool, f) {
    return { data: f.data.map((i) => pool[i]), layout: pool[f.layout] };
  }

  // -- text -------------------------------------------------------------------------------------------------------
  const canvas = document.createElement("canvas");

  // The width of one line of plotly markup: text in <sup> or <sub> is drawn at 70 %.
  function textWidth(text, size, family) {
    const ctx = canvas.getContext("2d");
    let width = 0, small = 0;
    (text.match(/<[^>]*>|[^<]+/g) || []).forEach((part) => {
      if (part[0] === "<") {
        if (/^<su[pb]\b/i.test(part)) small += 1;
        else if (/^<\/su[pb]/i.test(part)) small = Math.max(0, small - 1);
        return;
      }
      ctx.font = (small ? 0.7 * size : size) + "px " + family;
      width += ctx.measureText(part.replace(/&[a-z#0-9]+;/gi, "x")).width;
    });
    return width;
  }

  const isCJK = (c) => /[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f]/u.test(c);

  // The tags ``text`` leaves open (plotly's markup), innermost last.
  function openTags(text) {
    const open = [];
    (text.match(/<\/?[a-z]+[^>]*>/gi) || []).forEach((tag) => {
      const name = tag.match(/^<\/?([a-z]+)/i)[1].toLowerCase();
      if (name === "br") return;
      if (tag[1] === "/") { const i = open.map((t) => t.name).lastIndexOf(name); if (i >= 0) open.splice(i, 1); }
      else open.push({ name, tag });
    });
    return open;
  }

  // ``text`` (plotly's markup: <br> between lines, other tags kept whole, closed at a break and opened again after
  // it) in lines of at most ``width`` px, broken at a space or beside a CJK character (no line starts with a
  // closing mark or ends with an opening one), else anywhere. Returns {text, lines}.
  function wrap(text, width, size, family) {
    if (typeof text !== "string" || !text) return { text: text, lines: 0 };
    const out = [];
    let carried = "";  // the tags open at the end of the previous line
    text.split(/<br\s*\/?>/i).forEach((line) => {
      const parts = line.match(/<[^>]*>|&[a-z#0-9]+;|[\s\S]/giu) || [];
      let current = carried, breakAt = -1, prev = "";
      const push = (piece) => {
        const open = openTags(piece);
        out.push(piece + open.slice().reverse().map((t) => "</" + t.name + ">").join(""));
        return open.map((t) => t.tag).join("");
      };
      parts.forEach((part) => {
        const between = isCJK(part) || isCJK(prev) || /^\s$/.test(prev);
        if (current && prev && between && !CLOSE.has(part) && !OPEN.has(prev)) {
          breakAt = current.length;
        }
        current += part;
        if (part[0] !== "<" && textWidth(current, size, family) > width && breakAt > 0) {
          const reopen = push(current.slice(0, breakAt).trimEnd());
          current = reopen + current.slice(breakAt).trimStart();
          breakAt = -1;
        }
        if (part[0] !== "<") prev = part;
      });
      carried = push(current);
    });
    return { text: out.join("<br>").replace(/<(su[pb])><\/\1>/gi, ""), lines: out.length };
  }

  function lines(text) {
    return typeof text === "string" && text ? text.split(/<br\s*\/?>/i).length : 0;
  }

  function titleText(title) {
    return title && typeof title === "object" ? title.text : title;
  }

  function setTitle(owner, key, text) {
    if (owner[key] && typeof owner[key] === "object") owner[key] = Object.assign({}, owner[key], { text });
    else owner[key] = text;
  }

  // The px a paper-placed annotation's text may take, centred on (or starting or ending at) its place.
  function room(a, margin, width) {
    const px = margin.l + a.x * (width - margin.l - margin.r);
    return (a.xanchor === "left" ? width - px : a.xanchor === "right" ? px : 2 * Math.min(px, width - px)) - 8;
  }

  // -- the subplots -------------------------------------------------------------------------------------------------
  const axisKey = (ref, letter) => letter + "axis" + String(ref || letter).split(" ")[0].slice(1);  // "x2" -> "xaxis2"
  const axisId = (key) => key[0] + key.slice(5);  // "xaxis2" -> "x2"

  // The subplots of ``layout`` (an x axis and the y axis it is anchored to), and their columns (x domains) and
  // rows (y domains, top first).
  function subplots(layout) {
    const found = [];
    Object.keys(layout).filter((k) => /^xaxis\d*$/.test(k)).forEach((kx) => {
      const x = layout[kx] || {};
      if (x.overlaying) return;
      const ky = axisKey(x.anchor && x.anchor !== "free" ? x.anchor : "y", "y");
      found.push({ kx, ky, xd: x.domain || [0, 1], yd: (layout[ky] || {}).domain || [0, 1] });
    });
    if (!found.length) found.push({ kx: "xaxis", ky: "yaxis", xd: [0, 1], yd: [0, 1] });
    const key = (d) => d.map((v) => v.toFixed(3)).join(",");
    const cols = [...new Map(found.map((s) => [key(s.xd), s.xd])).values()].sort((a, b) => a[0] - b[0]);
    const rows = [...new Map(found.map((s) => [key(s.yd), s.yd])).values()].sort((a, b) => b[1] - a[1]);
    found.forEach((s) => {
      s.col = cols.findIndex((d) => key(d) === key(s.xd));
      s.row = rows.findIndex((d) => key(d) === key(s.yd));
    });
    return { found, cols, rows };
  }

  function nearest(domains, v, slack) {
    let best = -1, dist = Infinity;
    domains.forEach((d, i) => {
      const away = v < d[0] ? d[0] - v : v > d[1] ? v - d[1] : 0;
      if (away <= slack && away < dist) { best = i; dist = away; }
    });
    return best;
  }

  // The px below an x axis's plot area that its tick labels and title take: as measured on the drawn figure
  // (``f.below``), else estimated.
  function belowAxis(fig, key, f) {
    const px = estimateBelow(fig, key, f);
    if (f.used) f.used[key] = px;
    return px;
  }

  function estimateBelow(fig, key, f) {
    if (f.below && key in f.below) return f.below[key];
    const axis = fig.layout[key] || {};
    if (axis.side === "top" || axis.visible === false) return 0;
    let px = 0;
    if (axis.showticklabels !== false) {
      const ref = axisId(key);
      let most = 1;
      const count = (v) => { if (typeof v === "string") most = Math.max(most, lines(v)); };
      (axis.ticktext || []).forEach(count);
      fig.data.forEach((t) => { if ((t.xaxis || "x") === ref && Array.isArray(t.x)) t.x.forEach(count); });
      px += most * ((axis.tickfont || {}).size || f.base) * LINE + (axis.ticklen || 5) + 4;
    }
    const title = titleText(axis.title);
    if (title) px += lines(title) * ((axis.title.font || {}).size || f.axis) * LINE + 8;
    return px;
  }

  // Side-by-side subplots one above the other: each as tall as it was, in reading order (row by row, left to
  // right), with room between them for the upper one's tick labels and axis title and the lower one's (wrapped)
  // title. Annotations and shapes placed on the page's coordinates move with their subplot, a colour bar goes
  // beside its own. Nothing to do for a figure without side-by-side subplots.
  function stack(fig, margin, placed, width, f) {
    const layout = fig.layout;
    const { found, cols, rows } = subplots(layout);
    if (cols.length < 2) return;
    const height = layout.height || 450;
    const plotH = height - margin.t - margin.b;
    const plotW = width - margin.l - margin.r;
    const cells = [];
    rows.forEach((_, r) => cols.forEach((_, c) => {
      const s = found.find((x) => x.row === r && x.col === c);
      if (s) cells.push({ r, c, kx: s.kx, h: (rows[r][1] - rows[r][0]) * plotH, above: 0 });
    }));
    const slot = (r, c) => cells.find((cell) => cell.r === r && cell.c === c) || null;
    const cellAt = (x, y) => {
      const c = nearest(cols, x, 0.02), r = nearest(rows, y, 0.15);
      return c >= 0 && r >= 0 ? slot(r, c) : null;
    };
    const cellOfAxis = (ref, letter) => {
      const s = found.find((x) => (letter === "x" ? x.kx : x.ky) === axisKey(ref, letter));
      return s ? slot(s.row, s.col) : null;
    };
    const cellOf = (xref, yref, x, y) => xref === "paper" && yref === "paper" ? cellAt(x, y)
      : yref === "paper" ? cellOfAxis(xref, "x") : xref === "paper" ? cellOfAxis(yref, "y") : null;
    const mapX = (x, cell) => cell ? (x - cols[cell.c][0]) / (cols[cell.c][1] - cols[cell.c][0]) : x;
    const notes = (layout.annotations || []).map((a) => {
      const xref = a.xref || "x", yref = a.yref || "y";
      const cell = cellOf(xref, yref, a.x, a.y);
      if (xref === "paper" && typeof a.x === "number") a.x = mapX(a.x, cell);
      if (cell && xref === "paper" && yref === "paper" && a.y >= rows[cell.r][1] - 0.01 && a.yanchor !== "top") {
        const size = (a.font || {}).size || f.base;  // the subplot's title, wrapped as fitted() will wrap it
        a.text = wrap(a.text, room(a, placed, width), size, f.family).text;
        cell.above = Math.max(cell.above, lines(a.text) * size * LINE + 6);
      }
      return cell;
    });
    cells.forEach((cell) => {
      const axis = layout[cell.kx] = Object.assign({}, layout[cell.kx], { domain: [0, 1] });
      if (titleText(axis.title)) {
        const size = (axis.title.font || {}).size || f.axis;
        setTitle(axis, "title", wrap(titleText(axis.title), plotW, size, f.family).text);
      }
    });
    const gaps = cells.map((cell, i) => i ? belowAxis(fig, cells[i - 1].kx, f) + cell.above + 16 : 0);
    const newH = cells.reduce((sum, cell, i) => sum + cell.h + gaps[i], 0);
    let top = 0;
    cells.forEach((cell, i) => {
      top += gaps[i];
      cell.y1 = 1 - top / newH;
      cell.y0 = cell.y1 - cell.h / newH;
      top += cell.h;
    });
    // a y on the old page coordinates, on the new ones: inside (or near) a subplot it moves with it, px for px;
    // elsewhere it keeps its distance in px from the plot area's top or bottom edge
    const mapY = (y, cell) => cell ? cell.y0 + (y - rows[cell.r][0]) * plotH / newH
      : y > 0.5 ? 1 - (1 - y) * plotH / newH : y * plotH / newH;
    found.forEach((s) => {
      const cell = slot(s.row, s.col);
      layout[s.kx] = Object.assign({}, layout[s.kx], { domain: [0, 1] });
      layout[s.ky] = Object.assign({}, layout[s.ky], { domain: [cell.y0, cell.y1] });
    });
    Object.keys(layout).filter((k) => /^yaxis\d*$/.test(k) && layout[k] && layout[k].overlaying).forEach((k) => {
      const base = layout[axisKey(layout[k].overlaying, "y")];
      if (base && base.domain) layout[k] = Object.assign({}, layout[k], { domain: base.domain });
    });
    (layout.annotations || []).forEach((a, i) => {
      if ((a.yref || "y") === "paper" && typeof a.y === "number") a.y = mapY(a.y, notes[i]);
    });
    (layout.shapes || []).forEach((sh) => {
      const xref = sh.xref || "x", yref = sh.yref || "y";
      const cell = cellOf(xref, yref, (sh.x0 + sh.x1) / 2, (sh.y0 + sh.y1) / 2);
      if (xref === "paper") ["x0", "x1"].forEach((k) => { if (typeof sh[k] === "number") sh[k] = mapX(sh[k], cell); });
      if (yref === "paper") ["y0", "y1"].forEach((k) => { if (typeof sh[k] === "number") sh[k] = mapY(sh[k], cell); });
    });
    fig.data.forEach((trace) => {  // a colour bar beside its own subplot
      const bar = trace.colorbar || (trace.marker && trace.marker.colorbar);
      const cell = cellOfAxis(trace.xaxis || "x", "x");
      if (!bar || !cell || (bar.yref && bar.yref !== "paper")) return;
      const len = typeof bar.len === "number" ? bar.len : 1;
      if (bar.lenmode !== "pixels") bar.len = Math.min(len * plotH, cell.h) / newH;
      bar.y = (cell.y0 + cell.y1) / 2;
      bar.yanchor = "middle";
    });
    layout.height = height + newH - plotH;
  }

  // A narrow figure's legend (on the right, inside the plot or below it): below the lowest x axis's tick labels and
  // title, across, its entries wrapped to the width, with the bottom margin made to hold it (the plot area keeps
  // its height).
  function legendBelow(fig, margin, width, f) {
    const layout = fig.layout;
    const legend = layout.legend || {};
    const shown = fig.data.filter((t) => t.showlegend !== false && t.name && (t.showlegend || t.type !== "heatmap"));
    if (layout.showlegend === false || (layout.showlegend !== true && shown.length < 2)) return;
    if ((legend.yref || "paper") !== "paper" || (legend.xref || "paper") !== "paper") return;
    const size = (legend.font || {}).size || f.base;
    let rowsUsed = 1, x = 0;
    shown.forEach((t) => {
      t.name = wrap(String(t.name), width - 70, size, f.family).text;
      const item = 46 + Math.max(...t.name.split("<br>").map((s) => textWidth(s, size, f.family)));
      if (x && x + item > width - 10) { rowsUsed += 1; x = 0; }
      x += item;
      rowsUsed += lines(t.name) - 1;
    });
    const lowest = subplots(layout).found.sort((a, b) => a.yd[0] - b.yd[0])[0];
    const gap = belowAxis(fig, lowest.kx, f) + 10;
    const b = Math.max(margin.b, gap + rowsUsed * (size * LINE + 6) + 16);
    const plotH = (layout.height || 450) - margin.t - margin.b;
    layout.height = (layout.height || 450) + b - margin.b;
    layout.margin = Object.assign({}, layout.margin, { b });
    margin.b = b;
    layout.legend = Object.assign({}, legend, { orientation: "h", x: 0, xanchor: "left", y: -gap / plotH,
                                                yanchor: "top" });
  }

  // The figure plotly draws in a box ``width`` px wide (see the top); ``fig`` is a copy, changed in place.
  // ``measured``: what a first drawing of it showed it needs (shortfall).
  function fitted(fig, width, measured) {
    const layout = fig.layout;
    const template = (layout.template && layout.template.layout) || {};
    if (typeof layout.title === "string") layout.title = { text: layout.title };
    const design = layout.width || DESIGN_WIDTH;
    delete layout.width;
    layout.autosize = true;
    const margin = Object.assign({ l: 80, r: 80, t: 100, b: 80 }, template.margin, layout.margin);
    const font = Object.assign({ family: "sans-serif", size: 12 }, template.font, layout.font);
    const f = { family: font.family, base: font.size, axis: Math.round(font.size * 1.2),
                below: measured && measured.below, used: {} };
    const placed = Object.assign({}, margin, measured && measured.margin);  // (where plotly put the plot area)
    fig.used = f.used;  // (the room below each x axis it was given: shortfall() checks it)
    const narrow = width < Math.max(STACK_BELOW * design, COLUMN_WIDTH * subplots(layout).cols.length);
    let pinned = layout.title && typeof layout.title === "object" && layout.title.yref === "container"
      && typeof layout.title.y === "number";
    let titleTop = pinned ? (1 - layout.title.y) * (layout.height || 450) : 0;  // px: kept as the height changes
    let extra = (measured && measured.top) || 0;  // px the top margin grows by
    if (narrow) {
      stack(fig, margin, placed, width, f);
      Object.keys(layout).filter((k) => /^[xy]axis\d*$/.test(k) && layout[k]).forEach((k) => {
        // the margins grow to hold tick labels and axis titles (the design's room for them was a share of 980 px)
        if (layout[k].automargin === undefined) layout[k] = Object.assign({}, layout[k], { automargin: true });
      });
      fig.data.forEach((t) => {  // a point's label near the plot's edge is not cut off by it
        if (typeof t.mode === "string" && t.mode.includes("text") && t.cliponaxis === undefined) t.cliponaxis = false;
      });
      const shifts = (measured && measured.shifts) || {};
      Object.keys(shifts).forEach((i) => {
        const a = layout.annotations[i];
        a.yshift = (a.yshift || 0) + shifts[i];
      });
      extra += Math.max(0, ...Object.values(shifts));
      const nudges = (measured && measured.nudges) || {};
      Object.keys(nudges).forEach((i) => {
        const a = layout.annotations[i];
        if (a.showarrow !== false && (a.axref || "pixel") === "pixel") {
          a.ax = (typeof a.ax === "number" ? a.ax : -10) + nudges[i];  // (the text moves, the arrow's head stays)
        } else {
          a.xshift = (a.xshift || 0) + nudges[i];
        }
      });
    }
    // titles too long for the width wrap; the top margin and the height grow by the lines they gain
    const title = layout.title;
    if (titleText(title)) {
      const tf = (title.font && title.font.size) || (template.title && template.title.font && template.title.font.size)
        || Math.round(font.size * 1.4);
      const x = typeof title.x === "number" ? title.x : (template.title && template.title.x) || 0.5;
      const w = wrap(titleText(title), width * (1 - x) - 12, tf, font.family);
      const before = lines(titleText(title));
      extra += (w.lines - before) * tf * LINE;
      setTitle(layout, "title", w.text);
      if (w.lines > before && !pinned && (title.y === undefined || title.y === "auto")) {
        // plotly centres a title in the top margin: pinned where one line was, the lines it gains push the plot down
        pinned = true;
        titleTop = Math.max(4, (margin.t - tf * LINE) / 2);
        layout.title = Object.assign({}, layout.title, { yref: "container", yanchor: "top" });
      }
      if (pinned && before === 1 && w.lines > 1 && (layout.title.yanchor || "auto") !== "bottom") {
        // plotly draws a title of several lines 0.7 em (top) or 0.35 em (middle) higher than one of one line
        titleTop += (layout.title.yanchor === "middle" ? 0.35 : 0.7) * tf;
      }
    }
    let above = 0;  // (the subplots' titles above the plot area, below the figure's title)
    (layout.annotations || []).forEach((a) => {
      if (a.xref !== "paper" || typeof a.x !== "number" || typeof a.text !== "string") return;
      const size = (a.font && a.font.size) || font.size;
      const w = wrap(a.text, room(a, placed, width), size, font.family);
      if (a.yref === "paper" && a.y >= 0.99 && (a.yanchor || "auto") !== "top") {
        above = Math.max(above, (w.lines - lines(a.text)) * size * LINE);
      }
      a.text = w.text;
    });
    extra += above;
    const plotW = width - margin.l - margin.r;
    Object.keys(layout).filter((k) => /^xaxis\d*$/.test(k) && layout[k] && titleText(layout[k].title)).forEach((k) => {
      const axis = layout[k];
      const d = axis.domain || [0, 1];
      const w = wrap(titleText(axis.title), Math.max(plotW * (d[1] - d[0]), Math.min(plotW, 200)),
                     (axis.title.font && axis.title.font.size) || f.axis, font.family);
      setTitle(layout[k] = Object.assign({}, axis), "title", w.text);
    });
    if (extra > 0) {
      margin.t += extra;
      layout.margin = Object.assign({}, layout.margin, { t: margin.t });
      layout.height = (layout.height || 450) + extra;
    }
    if (narrow) legendBelow(fig, margin, width, f);
    if (pinned) layout.title = Object.assign({}, layout.title, { y: 1 - titleTop / layout.height });
    fig.narrow = narrow;
    return fig;
  }

  // What the drawn figure in ``gd`` shows it needs and did not get: the px below each x axis its tick labels and
  // title take, and how far the title reaches into what is below it. Null if nothing was short.
  function shortfall(gd, fig) {
    const full = gd._fullLayout;
    const svg = gd.querySelector(".main-svg");
    if (!full || !svg) return null;
    const top = svg.getBoundingClientRect().top;
    const bottom = (els) => Math.max(-Infinity, ...els.map((e) => e.getBoundingClientRect())
      .filter((r) => r.height > 0).map((r) => r.bottom - top));
    const below = {};
    let short = false;
    subplots(fig.layout).found.forEach((s) => {
      const xa = full[s.kx], ya = full[s.ky];
      if (!xa || !ya) return;
      const id = axisId(s.kx);
      const labels = Array.from(gd.querySelectorAll(`g.${id}tick text, text.${id}title`));
      const px = bottom(labels) - (ya._offset + ya._length);
      below[s.kx] = Math.max(0, Math.ceil(px) + 4);
      if (s.kx in fig.used && below[s.kx] > fig.used[s.kx] + 1) short = true;
    });
    const title = gd.querySelector(".gtitle");
    let overlap = 0;
    if (title && title.getBoundingClientRect().height) {
      const end = title.getBoundingClientRect().bottom - top + 10;
      const starts = Array.from(gd.querySelectorAll(".annotation")).map((e) => e.getBoundingClientRect())
        .filter((r) => r.height > 0 && r.top - top < full._size.t + 4).map((r) => r.top - top);
      overlap = Math.max(0, end - Math.min(full._size.t, ...starts));
    }
    // a label placed above a plot (in its data's x) that runs into another label goes above it, one at a time (the
    // top margin grows by as much, so the title stays clear)
    const anns = fig.layout.annotations || [];
    const rect = (e) => {
      const r = e.getBoundingClientRect();
      return { l: r.left, r: r.right, t: r.top, b: r.bottom };
    };
    const hit = (a, b) => a.l < b.r && b.l < a.r && a.t < b.b && b.t < a.b;
    const groups = Array.from(gd.querySelectorAll("g.annotation[data-index]"));
    const taken = groups.filter((g) => (anns[g.dataset.index] || {}).xref === "paper").map(rect);
    const shifts = {};
    groups.forEach((g) => {
      const a = anns[g.dataset.index] || {};
      if (a.xref === "paper" || !/(domain|paper)$/.test(a.yref || "") || !(a.y >= 1)) return;
      const r = rect(g);
      let up = 0;
      for (let moved = true; moved;) {
        moved = false;
        taken.forEach((o) => {
          const now = { l: r.l, r: r.r, t: r.t - up, b: r.b - up };
          if (hit(now, o)) { up += now.b - o.t + 2; moved = true; }
        });
      }
      if (up > 0) shifts[g.dataset.index] = Math.ceil(up);
      taken.push({ l: r.l, r: r.r, t: r.t - up, b: r.b - up });
    });
    const box = svg.getBoundingClientRect();
    // a label in a plot's data (its arrow's tail, or itself) that runs past the figure's edge or into the y axes'
    // titles and tick labels moves sideways, as far as it must
    const cls = (e) => (e && e.getAttribute && e.getAttribute("class")) || "";
    const side = Array.from(gd.querySelectorAll("text"))
      .filter((t) => /^y\d*title$/.test(cls(t)) || /^y\d*tick$/.test(cls(t.parentNode))).map(rect);
    const nudges = {};
    groups.forEach((g) => {
      const a = anns[g.dataset.index] || {};
      if (a.xref === "paper") return;
      const r = rect(g);
      const mid = (r.l + r.r) / 2;
      const rows = side.filter((o) => o.t < r.b && r.t < o.b && o.r - o.l > 0);
      const left = Math.max(box.left, ...rows.filter((o) => (o.l + o.r) / 2 < mid).map((o) => o.r)) + 2;
      const right = Math.min(box.right, ...rows.filter((o) => (o.l + o.r) / 2 >= mid).map((o) => o.l)) - 2;
      const dx = r.l < left ? Math.min(left - r.l, Math.max(0, right - r.r)) || left - r.l
        : r.r > right ? -Math.min(r.r - right, Math.max(0, r.l - left)) || right - r.r : 0;
      if (Math.abs(dx) >= 1) nudges[g.dataset.index] = Math.round(dx);
    });
    const out = Array.from(gd.querySelectorAll(".annotation-text, .gtitle")).some((e) => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && (r.right > box.right + 1 || r.left < box.left - 1);
    });
    return short || out || overlap > 1 || Object.keys(shifts).length || Object.keys(nudges).length
      ? { below, top: Math.ceil(overlap), shifts, nudges, margin: { l: full._size.l, r: full._size.r } } : null;
  }

  // Draw ``fig`` into ``box`` (a figure's box, .kvlab-plot or .kvlab-figure-static): plotly draws into a
  // .kvlab-plot-area inside it, made once. ``box.kvlabFigure`` keeps the figure as the page holds it (the tests
  // compare it with the live render); plotly gets a fitted copy (it writes into what it is given). A narrow
  // figure is measured once drawn, and drawn again with the room it showed it needs.
  function draw(box, fig) {
    box.kvlabFigure = fig;
    let area = box.querySelector(":scope > .kvlab-plot-area");
    if (!area) {
      area = document.createElement("div");
      area.className = "kvlab-plot-area";
      box.appendChild(area);
    }
    const shown = area.clientWidth;  // (0 while the page hides it: drawn as designed)
    const width = shown ? Math.max(MIN_WIDTH, shown) : (fig.layout && fig.layout.width) || DESIGN_WIDTH;
    const turn = box.kvlabTurn = (box.kvlabTurn || 0) + 1;
    box.kvlabWidth = width;
    const first = fitted(JSON.parse(JSON.stringify(fig)), width);
    return Plotly.react(area, first.data, first.layout, CONFIG).then(() => {
      const need = first.narrow && turn === box.kvlabTurn ? shortfall(area, first) : null;
      if (!need) return null;
      const again = fitted(JSON.parse(JSON.stringify(fig)), width, need);
      return Plotly.react(area, again.data, again.layout, CONFIG);
    }).then(() => { box.dataset.drawn = "1"; });
  }

  // A formula wider than the paragraph, list item or cell it is in (MathJax's MathML is one piece that cannot
  // wrap) goes on a line of its own that scrolls sideways by itself (book.css: .kvlab-wide-math).
  function wideMath(root) {
    (root || document).querySelectorAll(".MathJax_MathContainer").forEach((m) => {
      m.classList.remove("kvlab-wide-math");
      const box = m.parentElement && m.parentElement.closest("p, li, td, th, div");
      if (box && m.getBoundingClientRect().right > box.getBoundingClientRect().right + 1) {
        m.classList.add("kvlab-wide-math");
      }
    });
  }

  function afterMath(root, done) {
    if (window.MathJax && MathJax.Hub) MathJax.Hub.Queue(() => { wideMath(root); if (done) done(); });
    else if (done) done();
  }

  // When a box's width changes (a phone turned, a window resized), its figure is fitted again.
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => {
      document.querySelectorAll(".kvlab-plot, .kvlab-figure-static").forEach((box) => {
        const area = box.querySelector(":scope > .kvlab-plot-area");
        if (!box.kvlabFigure || !area) return;
        if (area.clientWidth && Math.abs(Math.max(MIN_WIDTH, area.clientWidth) - box.kvlabWidth) >= 1) {
          draw(box, box.kvlabFigure);
        }
      });
      wideMath();
    }, 150);
  });

  function initPlot(el) {
    return draw(el, data(el));
  }

  function initPanel(el) {
    const spec = data(el);
    const readout = el.querySelector(".kvlab-static-readout");
    const plots = Array.from(el.querySelectorAll(".kvlab-plot"));
    const inputs = Array.from(el.querySelectorAll("[data-control]"));
    el.kvlabSpec = spec;

    function show(state) {
      if (state.error) {
        el.classList.add("kvlab-stale");
        el.querySelector(".kvlab-static-message").innerHTML = state.error;
        return Promise.resolve();
      }
      el.classList.remove("kvlab-stale");
      el.querySelector(".kvlab-static-message").innerHTML = "";
      readout.innerHTML = state.html;
      if (window.MathJax && MathJax.Hub) MathJax.Hub.Queue(["Typeset", MathJax.Hub, readout]);
      afterMath(readout);
      return Promise.all(state.figures.map((f, i) => plots[i] && draw(plots[i], figureOf(spec.pool, f))));
    }

    function label(input, control) {
      const out = input.parentElement.querySelector(".kvlab-value");
      if (out) out.textContent = control.labels[Number(input.value)];
    }

    inputs.forEach((input) => {
      const control = spec.controls.find((c) => c.name === input.dataset.control);
      label(input, control);
      input.addEventListener("input", () => {
        inputs.forEach((other) => {  // one control at a time: the others go back to their defaults
          if (other === input) return;
          const c = spec.controls.find((x) => x.name === other.dataset.control);
          other.value = String(c.default);
          label(other, c);
        });
        label(input, control);
        el.dataset.busy = "1";
        show(control.states[Number(input.value)]).then(() => { delete el.dataset.busy; });
      });
    });
    return show(spec.shown);
  }

  function start() {
    const jobs = [];
    document.querySelectorAll(".kvlab-static-panel").forEach((el) => jobs.push(initPanel(el)));
    document.querySelectorAll(".kvlab-figure-static").forEach((el) => jobs.push(initPlot(el)));
    Promise.all(jobs).then(() => { window.kvlabFiguresDrawn = true; });
    afterMath(document, () => { window.kvlabMathFitted = true; });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
