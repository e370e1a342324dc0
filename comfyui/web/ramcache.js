// @ts-check
// The ramcache-bpf badge, sidebar panel and pressure toasts in ComfyUI's
// frontend. Polls /ramcache/status (comfyui/routes.py) every 2 s.
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";
import { badge, panelLines, rise } from "./ramcache_view.js";

const POLL_MS = 2000;
const COLORS = { off: "#666", ok: "#2e7d32", warn: "#f9a825", high: "#ef6c00", critical: "#c62828" };

/** @type {import("./ramcache_view.js").Status | null} */
let last = null;
/** @type {HTMLElement | null} */
let panel = null;

function makeBadge() {
  const el = document.createElement("div");
  el.id = "ramcache-badge";
  Object.assign(el.style, {
    position: "fixed", right: "12px", bottom: "12px", zIndex: "1000",
    padding: "3px 8px", borderRadius: "10px", font: "12px sans-serif",
    color: "#fff", background: COLORS.off, pointerEvents: "auto", cursor: "default",
  });
  document.body.appendChild(el);
  return el;
}

/** @param {HTMLElement} el @param {import("./ramcache_view.js").Status | null} st */
function renderPanel(el, st) {
  el.replaceChildren(...panelLines(st, Date.now() / 1000).map((line) => {
    const p = document.createElement("div");
    p.textContent = line;
    p.style.padding = "2px 8px";
    return p;
  }));
}

/** @returns {Promise<import("./ramcache_view.js").Status | null>} */
async function fetchStatus() {
  try {
    const r = await api.fetchApi("/ramcache/status", { cache: "no-store" });
    return r.ok ? await r.json() : null;
  } catch {
    return null;
  }
}

app.registerExtension({
  name: "ramcache-bpf.status",
  async setup() {
    const el = makeBadge();
    const manager = app.extensionManager;
    manager?.registerSidebarTab?.({
      id: "ramcache",
      title: "RAM cache",
      icon: "pi pi-server",
      tooltip: "ramcache-bpf: memory pressure and evictions",
      iconBadge: () => (last && last.attached && last.level !== "ok" ? last.level : null),
      type: "custom",
      render: (container) => {
        panel = container;
        renderPanel(container, last);
      },
      destroy: () => {
        panel = null;
      },
    });
    const tick = async () => {
      const st = await fetchStatus();
      const b = badge(st);
      el.textContent = b.text;
      el.title = b.title;
      el.style.background = COLORS[b.tone];
      const toast = st ? rise(last, st) : null;
      if (toast) manager?.toast?.add({ ...toast, life: 8000 });
      last = st;
      if (panel) renderPanel(panel, st);
    };
    await tick();
    setInterval(tick, POLL_MS);
  },
});
