// The explorer's drawing code. Every number comes from posenc (PosencModule: posenc_web.js, the C++
// library compiled to WebAssembly); this file only calls it, formats with String() (the shortest text
// that reads back as the same double) and draws SVG.
"use strict";

const REGIME_COLOURS = {unscaled: "#2ca02c", extrapolated: "#1f77b4", blended: "#ff7f0e",
                        interpolated: "#d62728", scaled: "#9467bd", unrotated: "#7f7f7f"};
const SVGNS = "http://www.w3.org/2000/svg";
let posenc = null;  // {describe, rotatePair, scores, families}

function $(id) { return document.getElementById(id); }
function call(fn, ...args) {
  const r = JSON.parse(fn(...args));
  if (r && r.error) throw new Error(r.error);
  return r;
}
function el(tag, attrs, parent, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(SVGNS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}
function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
function fixed(x, n) { return Math.abs(x) < 0.5 * Math.pow(10, -n) ? (0).toFixed(n) : x.toFixed(n); }

// A line/dot chart: xs, series [{ys, colour, dots, label}], log-y optional, hlines [{y, label}].
function chart(svg, xs, series, opts) {
  clear(svg);
  const W = +svg.getAttribute("width"), H = +svg.getAttribute("height"), L = 70, R = 10, T = 10, B = 40;
  const ty = opts.logy ? (y) => Math.log10(y) : (y) => y;
  const all = series.flatMap((s) => s.ys).concat((opts.hlines || []).map((h) => h.y)).filter((y) => isFinite(ty(y)));
  let y0 = Math.min(...all.map(ty)), y1 = Math.max(...all.map(ty));
  if (y0 === y1) { y0 -= 1; y1 += 1; }
  const x0 = Math.min(...xs), x1 = Math.max(...xs) === x0 ? x0 + 1 : Math.max(...xs);
  const px = (x) => L + (x - x0) / (x1 - x0) * (W - L - R), py = (y) => T + (1 - (ty(y) - y0) / (y1 - y0)) * (H - T - B);
  el("svg:line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999"}, svg);
  el("svg:line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#999"}, svg);
  el("svg:text", {x: (L + W) / 2, y: H - 6, "text-anchor": "middle", "font-size": 12}, svg, opts.xlabel);
  el("svg:text", {x: 12, y: (T + H - B) / 2, "font-size": 12, transform: `rotate(-90 12 ${(T + H - B) / 2})`,
                  "text-anchor": "middle"}, svg, opts.ylabel);
  for (const [v, a] of [[y0, "end"], [y1, "end"]]) {
    const label = opts.logy ? "1e" + fixed(v, 1) : fixed(v, 2);
    el("svg:text", {x: L - 4, y: py(opts.logy ? Math.pow(10, v) : v) + 4, "text-anchor": a, "font-size": 11}, svg, label);
  }
  el("svg:text", {x: L, y: H - B + 14, "font-size": 11}, svg, String(x0));
  el("svg:text", {x: W - R, y: H - B + 14, "font-size": 11, "text-anchor": "end"}, svg, String(x1));
  for (const h of opts.hlines || []) {
    el("svg:line", {x1: L, x2: W - R, y1: py(h.y), y2: py(h.y), stroke: "#000", "stroke-dasharray": "5,4"}, svg);
    el("svg:text", {x: W - R - 4, y: py(h.y) - 4, "text-anchor": "end", "font-size": 11}, svg, h.label);
  }
  for (const s of series) {
    if (s.dots) {
      s.ys.forEach((y, i) => {
        if (isFinite(ty(y))) el("svg:circle", {cx: px(xs[i]), cy: py(y), r: 3, fill: s.colours ? s.colours[i] : s.colour}, svg);
      });
    } else {
      const pts = s.ys.map((y, i) => `${px(xs[i])},${py(y)}`).join(" ");
      el("svg:polyline", {points: pts, fill: "none", stroke: s.colour, "stroke-width": 1.5}, svg);
    }
  }
}

// ---- 0. the lesson's story ----
function heatmap(svg, w, mask) {
  clear(svg);
  const n = w.length, size = +svg.getAttribute("width") / n;
  w.forEach((row, i) => row.forEach((x, j) => {
    const masked = mask[i][j] === 1;
    const shade = masked ? "#d0d0d0" : `rgb(${Math.round(255 - 200 * x)}, ${Math.round(255 - 120 * x)}, 255)`;
    el("svg:rect", {x: j * size, y: i * size, width: size - 1, height: size - 1, fill: shade}, svg);
    if (!masked) el("svg:text", {x: j * size + size / 2, y: i * size + size / 2 + 4, "text-anchor": "middle",
                                  "font-size": 11}, svg, x.toFixed(2));
  }));
}
function updateStory() {
  const causal = $("story-causal").checked;
  if ($("story-scheme").value === "3" && !causal) $("story-causal").checked = true;
  const s = call(posenc.story, +$("story-scheme").value, $("story-causal").checked ? 1 : 0);
  heatmap($("story-a"), s.a, s.mask_a);
  heatmap($("story-b"), s.b_mapped_back, s.mask_b);
  $("story-gap").textContent = String(s.max_gap);
  $("story-verdict").textContent = s.max_gap < 1e-12 ? "the same map (to float rounding): word-order blind" : "different: order-aware";
  $("story-a").dataset.weights = JSON.stringify(s.a);
  $("story-b").dataset.weights = JSON.stringify(s.b_mapped_back);
  $("story-b").dataset.masked = String(s.mask_b.flat().filter((m) => m === 1).length);
}

// ---- 1. one pair turning ----
function basePower() { return Math.pow(10, +$("base").value); }
function updatePair() {
  const m = +$("m").value, n = +$("n").value, base = basePower();
  $("m-value").textContent = m; $("n-value").textContent = n; $("base-value").textContent = String(Math.round(base));
  const s = call(posenc.scores, 16, base, m, 24, 2);
  const r = call(posenc.rotatePair, 1, 0, 1, 0, s.theta, m, n);
  $("pair-theta").textContent = String(s.theta);
  $("pair-angle").textContent = String(r.angle_q);
  $("pair-q").textContent = `[${fixed(r.q[0], 4)}, ${fixed(r.q[1], 4)}]`;
  $("pair-k").textContent = `[${fixed(r.k[0], 4)}, ${fixed(r.k[1], 4)}]`;
  $("pair-dot").textContent = fixed(r.dot, 6);
  const c = call(posenc.rotatePair, 1, 0, 1, 0, s.theta, m - n >= 0 ? m - n : 0, m - n >= 0 ? 0 : n - m);
  $("pair-cos").textContent = fixed(c.dot, 6);  // the same pair turned by (m - n) theta alone
  const svg = clear($("circle"));
  el("svg:circle", {cx: 0, cy: 0, r: 1, fill: "none", stroke: "#ccc", "stroke-width": 0.01}, svg);
  el("svg:line", {x1: 0, y1: 0, x2: r.q[0], y2: -r.q[1], stroke: "#1f77b4", "stroke-width": 0.03}, svg);
  el("svg:line", {x1: 0, y1: 0, x2: r.k[0], y2: -r.k[1], stroke: "#d62728", "stroke-width": 0.03}, svg);
  el("svg:text", {x: r.q[0] * 1.1, y: -r.q[1] * 1.1, "font-size": 0.12, fill: "#1f77b4"}, svg, "q'");
  el("svg:text", {x: r.k[0] * 1.1, y: -r.k[1] * 1.1, "font-size": 0.12, fill: "#d62728"}, svg, "k'");
  chart($("scores"), s.relative, [{ys: s.scores, colour: "#1f77b4"}], {xlabel: "m - n (tokens)", ylabel: "q . k"});
  $("scores").dataset.scores = JSON.stringify(s.scores);
}

// ---- 2. the exercises ----
function exercises() {
  const t = $("exercises");
  const rows = [
    ["1: v = [1, 0], m = 1, theta = pi/4", call(posenc.rotatePair, 1, 0, 1, 0, Math.PI / 4, 1, 0),
     (r) => `v' = [${fixed(r.q[0], 4)}, ${fixed(r.q[1], 4)}], |v'| = ${fixed(r.q_norm, 4)}`, "v' = [0.7071, 0.7071], |v'| = 1.0000"],
    ["2: q = k = [1, 0], m = 2, n = 1, theta = pi/4", call(posenc.rotatePair, 1, 0, 1, 0, Math.PI / 4, 2, 1),
     (r) => `q' = [${fixed(r.q[0], 1)}, ${fixed(r.q[1], 1)}], k' = [${fixed(r.k[0], 4)}, ${fixed(r.k[1], 4)}], q'.k' = ${fixed(r.dot, 4)}`,
     "q' = [0.0, 1.0], k' = [0.7071, 0.7071], q'.k' = 0.7071"],
    ["3: w = [3, 4], m = 2, theta = pi/2", call(posenc.rotatePair, 3, 4, 1, 0, Math.PI / 2, 2, 0),
     (r) => `w' = [${fixed(r.q[0], 1)}, ${fixed(r.q[1], 1)}], |w'| = ${fixed(r.q_norm, 1)}`, "w' = [-3.0, -4.0], |w'| = 5.0"],
  ];
  rows.forEach(([name, r, show, want], i) => {
    const tr = el("tr", {id: `exercise-${i + 1}`}, t);
    el("td", {}, tr, name);
    el("td", {class: "computed"}, tr, show(r));
    el("td", {}, tr, want);
    const ok = show(r) === want;
    el("td", {class: ok ? "ok" : "bad"}, tr, ok ? "matches" : "differs");
  });
}

// ---- 3. a model ----
let current = null;  // {text, maxLen}
function seqFromSlider() {
  const top = 4 * (current ? current.maxLen : 4096);
  return Math.max(1, Math.round(Math.exp(+$("seq").value / 1000 * Math.log(top))));
}
function setSeq(seq) {
  const top = 4 * (current ? current.maxLen : 4096);
  $("seq").value = String(Math.round(Math.log(Math.max(1, seq)) / Math.log(top) * 1000));
}
function loadConfig(text, seq) {
  $("model-error").textContent = "";
  let d;
  try {
    d = call(posenc.describe, text, -1);
  } catch (e) {
    $("model-error").textContent = e.message;
    return;
  }
  current = {text, maxLen: d.max_position_embeddings || 4096};
  setSeq(seq || current.maxLen);
  updateModel();
}
function updateModel() {
  if (!current) return;
  const seq = seqFromSlider();
  $("seq-value").textContent = seq;
  let d;
  try {
    d = call(posenc.describe, current.text, seq);
    $("model-error").textContent = "";
  } catch (e) {
    $("model-error").textContent = e.message;
    return;
  }
  const sum = clear($("model-summary"));
  const keys = ["scheme", "model_type", "layout", "head_dim", "rotary_start", "rotary_dim", "base", "scaling",
                "nominal_factor", "max_position_embeddings", "original_max_position_embeddings", "seq_len", "attention_scaling"];
  for (const k of keys) {
    if (d[k] === undefined) continue;
    const tr = el("tr", {}, sum);
    el("th", {}, tr, k);
    el("td", {id: `model-${k}`}, tr, String(d[k]));
  }
  if (d.multi_axis) {
    const tr = el("tr", {}, sum);
    el("th", {}, tr, "M-RoPE sections");
    el("td", {id: "model-sections"}, tr, d.multi_axis.sections.join(", ") + ` (${d.multi_axis.section_layout})`);
  }
  const layers = clear($("layers"));
  if (d.layers) {
    el("p", {}, layers, `Per layer (${d.layers.count} layers, rule: ${d.layers.rule}; ${d.layers.nope_layers} NoPE):`);
    const t = el("table", {id: "model-layers"}, layers);
    let tr = null;
    d.layers.rope.forEach((r, i) => {
      if (i % 16 === 0) el("th", {}, (tr = el("tr", {}, t)), `layers ${i}-${Math.min(i + 15, d.layers.count - 1)}`);
      el("td", {title: `layer ${i}`, style: `background:${r ? "#dfe" : "#fdd"}`}, tr, r ? "RoPE" : "NoPE");
    });
  }
  const pairs = clear($("model-pairs"));
  const head = el("tr", {}, pairs);
  for (const h of ["pair", "frequency", "wavelength", "divisor", "regime"]) el("th", {}, head, h);
  (d.pairs || []).forEach((p) => {
    const tr = el("tr", {}, pairs);
    el("td", {}, tr, String(p.pair));
    el("td", {class: "frequency"}, tr, String(p.frequency));
    el("td", {class: "wavelength"}, tr, p.wavelength === null ? "inf" : String(p.wavelength));
    el("td", {class: "divisor"}, tr, p.divisor === undefined ? "-" : String(p.divisor));
    el("td", {class: "regime", style: `color:${REGIME_COLOURS[p.regime] || "#000"}`}, tr, p.regime);
  });
  if (d.pairs) {
    const xs = d.pairs.map((p) => p.pair);
    const ctx = d.original_max_position_embeddings || d.max_position_embeddings;
    chart($("wavelengths"), xs, [
      {ys: d.unscaled_wavelengths, colour: "#999"},
      {ys: d.pairs.map((p) => (p.wavelength === null ? Infinity : p.wavelength)), dots: true,
       colours: d.pairs.map((p) => REGIME_COLOURS[p.regime] || "#000")},
    ], {logy: true, xlabel: "pair i (fast to slow); grey line: unscaled base^(-2i/d)",
        ylabel: "wavelength (tokens, log)", hlines: ctx ? [{y: ctx, label: `original context ${ctx}`}] : []});
  } else {
    clear($("wavelengths"));
  }
}

function examples() {
  const sel = $("example");
  (window.POSENC_EXAMPLES || []).forEach((e, i) => el("option", {value: String(i)}, sel, e.name));
  sel.addEventListener("change", () => {
    const e = window.POSENC_EXAMPLES[+sel.value];
    $("config").value = JSON.stringify(e.record.config, null, 1);
    loadConfig($("config").value);
  });
  const fam = $("family");
  for (const f of call(posenc.families)) {
    if (f.scheme === "rope") el("option", {value: f.model_type}, fam, `${f.model_type} (${f.pairing})`);
  }
  fam.addEventListener("change", () => {
    if (!fam.value) return;
    $("config").value = JSON.stringify({model_type: fam.value, hidden_size: 4096, num_attention_heads: 32,
                                        max_position_embeddings: 4096, rope_theta: 10000.0}, null, 1);
    loadConfig($("config").value);
  });
}

function legend() {
  const l = clear($("regime-legend"));
  Object.entries(REGIME_COLOURS).forEach(([name, colour], i) => {
    if (i) l.appendChild(document.createTextNode(", "));
    el("b", {style: `color:${colour}`}, l, name);
  });
}

PosencModule().then((m) => {
  const f = (name, args) => m.cwrap(name, "string", args);
  posenc = {describe: f("posenc_describe", ["string", "number"]),
            rotatePair: f("posenc_rotate_pair", Array(7).fill("number")),
            scores: f("posenc_scores", Array(5).fill("number")),
            families: f("posenc_families", []),
            story: f("posenc_story", ["number", "number"])};
  for (const id of ["m", "n", "base"]) $(id).addEventListener("input", updatePair);
  $("seq").addEventListener("input", updateModel);
  for (const id of ["story-scheme", "story-causal"]) $(id).addEventListener("change", updateStory);
  $("show").addEventListener("click", () => loadConfig($("config").value));
  legend();
  updateStory();
  updatePair();
  exercises();
  examples();
  $("example").dispatchEvent(new Event("change"));
  $("status").textContent = "posenc loaded.";
  window.posencReadyMs = performance.now();  // since navigation start
  window.posencReady = true;
});
