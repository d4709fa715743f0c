/* crashpoint report: theme, filter, hide held, sorting, keyboard, copy.
   Reads only the DOM and JSON parsed with JSON.parse; never builds HTML from data. */
(function () {
  "use strict";
  var doc = document;
  var root = doc.documentElement;
  var THEME_KEY = "crashpoint-theme";

  function stored(key) {
    try { return window.localStorage.getItem(key); } catch (e) { return null; }
  }
  function store(key, value) {
    try { window.localStorage.setItem(key, value); } catch (e) { /* file:// may refuse */ }
  }

  /* theme: explicit choice wins over prefers-color-scheme */
  var theme = stored(THEME_KEY);
  if (theme === "dark" || theme === "light") { root.setAttribute("data-theme", theme); }
  function toggleTheme() {
    var current = root.getAttribute("data-theme");
    if (!current) {
      current = window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
    }
    var next = current === "dark" ? "light" : "dark";
    root.setAttribute("data-theme", next);
    store(THEME_KEY, next);
  }
  var toggle = doc.getElementById("theme-toggle");
  if (toggle) { toggle.addEventListener("click", toggleTheme); }

  /* filter + hide held: both the matrix rows and the trial list */
  var filter = doc.getElementById("filter");
  var hideHeld = doc.getElementById("hide-held");
  var shown = doc.getElementById("shown-count");
  function applyFilter() {
    var words = (filter ? filter.value : "").toLowerCase().split(/\s+/).filter(Boolean);
    var hide = hideHeld && hideHeld.checked;
    var visible = 0;
    var total = 0;
    doc.querySelectorAll("#matrix tbody tr, #trial-list tbody tr").forEach(function (tr) {
      var text = (tr.getAttribute("data-search") || "").toLowerCase();
      var ok = words.every(function (w) { return text.indexOf(w) !== -1; });
      if (hide && tr.getAttribute("data-status") === "held") { ok = false; }
      tr.classList.toggle("hidden", !ok);
      if (tr.closest("#matrix")) { total += 1; if (ok) { visible += 1; } }
    });
    if (shown) { shown.textContent = visible + " of " + total + " rows"; }
    store("crashpoint-hide-held", hide ? "1" : "0");
  }
  if (filter) { filter.addEventListener("input", applyFilter); }
  if (hideHeld) {
    hideHeld.checked = stored("crashpoint-hide-held") === "1";
    hideHeld.addEventListener("change", applyFilter);
  }
  if (filter || hideHeld) { applyFilter(); }

  /* sorting: a header button sorts its table body by that column's data-sort (or text) */
  function sortKey(row, col) {
    var cell = row.children[col];
    if (!cell) { return ""; }
    var raw = cell.getAttribute("data-sort");
    if (raw === null) { raw = cell.textContent.trim(); }
    var n = Number(raw);
    return raw !== "" && !isNaN(n) ? n : raw.toLowerCase();
  }
  doc.querySelectorAll("button.sort").forEach(function (button) {
    button.addEventListener("click", function () {
      var th = button.closest("th");
      var table = button.closest("table");
      var col = Number(button.getAttribute("data-col"));
      /* worst-first is the useful first click for status columns; names sort ascending */
      var worstFirst = button.hasAttribute("data-desc");
      var before = th.getAttribute("aria-sort");
      var dir = before === "none" || !before ? (worstFirst ? "descending" : "ascending")
        : before === "ascending" ? "descending" : "ascending";
      table.querySelectorAll("thead th").forEach(function (h) {
        if (h.hasAttribute("aria-sort")) { h.setAttribute("aria-sort", "none"); }
      });
      th.setAttribute("aria-sort", dir);
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      rows.forEach(function (r, i) { r._i = i; });
      rows.sort(function (a, b) {
        var x = sortKey(a, col), y = sortKey(b, col);
        var c = x < y ? -1 : x > y ? 1 : a._i - b._i;
        return dir === "ascending" ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });

  /* keyboard: / filter, t theme, arrows or h j k l between matrix cells, Enter opens */
  function cellGrid() {
    var rows = doc.querySelectorAll("#matrix tbody tr:not(.hidden)");
    return Array.prototype.map.call(rows, function (tr) {
      return Array.prototype.slice.call(tr.querySelectorAll("td.cell")).map(function (td) {
        return td.querySelector("a");
      });
    });
  }
  function move(dr, dc) {
    var grid = cellGrid();
    if (!grid.length) { return; }
    var r = -1, c = -1;
    grid.forEach(function (row, i) {
      var j = row.indexOf(doc.activeElement);
      if (j !== -1) { r = i; c = j; }
    });
    if (r === -1) { r = 0; c = -1; dr = 0; dc = 1; }
    /* step over empty cells in the direction of travel */
    for (var step = 0; step < 200; step += 1) {
      r += dr; c += dc;
      if (r < 0 || r >= grid.length || c < 0 || c >= grid[r].length) { return; }
      if (grid[r][c]) { grid[r][c].focus(); return; }
      if (dr === 0 && dc === 0) { return; }
    }
  }
  var KEYS = {
    ArrowUp: [-1, 0], k: [-1, 0], ArrowDown: [1, 0], j: [1, 0],
    ArrowLeft: [0, -1], h: [0, -1], ArrowRight: [0, 1], l: [0, 1]
  };
  doc.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    var target = ev.target;
    var typing = target && (target.tagName === "INPUT" || target.tagName === "TEXTAREA");
    if (typing) {
      if (ev.key === "Escape") { target.blur(); }
      return;
    }
    if (ev.key === "/" && filter) { ev.preventDefault(); filter.focus(); filter.select(); return; }
    if (ev.key === "t") { toggleTheme(); return; }
    var d = KEYS[ev.key];
    if (d && doc.getElementById("matrix")) { ev.preventDefault(); move(d[0], d[1]); }
  });

  /* copy the replay command from the page's JSON, not from rendered text */
  doc.querySelectorAll("button.copy").forEach(function (button) {
    button.addEventListener("click", function () {
      var section = button.closest("section");
      var data = section && section.querySelector("script.trial-data");
      var text = data ? JSON.parse(data.textContent).replay : "";
      function done() {
        button.textContent = "copied";
        button.classList.add("done");
        window.setTimeout(function () { button.textContent = "copy"; button.classList.remove("done"); }, 1500);
      }
      function fallback() {
        var area = doc.createElement("textarea");
        area.value = text;
        area.setAttribute("readonly", "");
        area.style.position = "fixed";
        area.style.opacity = "0";
        doc.body.appendChild(area);
        area.select();
        try { doc.execCommand("copy"); done(); } catch (e) { /* nothing more to try */ }
        doc.body.removeChild(area);
      }
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, fallback);
      } else {
        fallback();
      }
    });
  });
})();
