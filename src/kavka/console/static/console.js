// kavka console: sortable and filterable tables, and live regions refreshed by polling.
// No framework and no build step: the page works without it; this only adds comfort.
"use strict";

function cellValue(row, i) {
  const text = (row.cells[i] && row.cells[i].textContent.trim()) || "";
  const n = Number(text.split(/[ ,]/)[0]);
  return text !== "" && !Number.isNaN(n) ? n : text.toLowerCase();
}

function sortBy(th) {
  const table = th.closest("table");
  const i = Array.from(th.parentNode.children).indexOf(th);
  const dir = th.dataset.dir === "asc" ? "desc" : "asc";
  table.querySelectorAll("th").forEach((h) => delete h.dataset.dir);
  th.dataset.dir = dir;
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = cellValue(a, i), y = cellValue(b, i);
    const c = x < y ? -1 : x > y ? 1 : 0;
    return dir === "asc" ? c : -c;
  });
  rows.forEach((r) => body.appendChild(r));
  table.dataset.sortCol = i; table.dataset.sortDir = dir;
}

function applyFilter(input) {
  const table = document.getElementById(input.dataset.filterFor);
  if (!table) return;
  const needle = input.value.trim().toLowerCase();
  for (const row of table.tBodies[0].rows) {
    row.hidden = needle !== "" && !row.textContent.toLowerCase().includes(needle);
  }
}

function wire(root) {
  root.querySelectorAll("table.sortable th").forEach((th) => th.addEventListener("click", () => sortBy(th)));
  document.querySelectorAll("input[data-filter-for]").forEach(applyFilter);
}

// Keeps a table's sort order across a refresh.
function restoreSort(oldRoot, newRoot) {
  oldRoot.querySelectorAll("table.sortable[id]").forEach((old) => {
    const fresh = newRoot.querySelector("#" + CSS.escape(old.id));
    if (!fresh || old.dataset.sortCol === undefined) return;
    const th = fresh.tHead.rows[0].cells[Number(old.dataset.sortCol)];
    if (!th) return;
    th.dataset.dir = old.dataset.sortDir === "asc" ? "desc" : "asc";
    sortBy(th);
  });
}

async function refresh(live) {
  try {
    const resp = await fetch(location.href, { headers: { "X-Kavka-Live": "1" }, credentials: "same-origin" });
    if (!resp.ok) { live.dataset.stale = "1"; return; }
    const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
    const fresh = doc.getElementById("live");
    if (!fresh) return;
    wire(fresh);
    restoreSort(live, fresh);
    live.replaceChildren(...fresh.childNodes);
    delete live.dataset.stale;
    document.querySelectorAll("input[data-filter-for]").forEach(applyFilter);
    live.dispatchEvent(new CustomEvent("kavka:refreshed", { bubbles: true }));
  } catch (e) {
    live.dataset.stale = "1";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  wire(document);
  document.querySelectorAll("input[data-filter-for]").forEach((input) => input.addEventListener("input", () => applyFilter(input)));
  const live = document.getElementById("live");
  if (live && live.dataset.live) {
    const every = Number(live.dataset.live) * 1000;
    const tick = () => { if (!document.hidden) refresh(live); };
    setInterval(tick, every);
  }
});
