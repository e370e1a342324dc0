// node --test: what the extension shows for /ramcache/status replies.
import { test } from "node:test";
import assert from "node:assert/strict";
import { badge, panelLines, rise, setAside, sizeText } from "../../web/ramcache_view.js";

const MiB = 1 << 20;
const base = {
  page: true, reason: null, control: "memfd:ramcache", attached: true, agent_pid: 42,
  level: "ok", headroom: 3072 * MiB, target: 0, eta_s: null, cache: "ram", entries: 3,
  evicted: 1, evicted_bytes: 48 * MiB, rss_drop: 52 * MiB, settled: 0, hooks: [],
  last: [{ id: 7, label: "4:VAEDecode", bytes: 48 * MiB, rss_drop: 52 * MiB,
           reason: "inactive", latency_ms: 12.4, time: 1000 }],
  comfyui: { version: "0.3.75", cache_type: "RAM_PRESSURE", recommended: "python main.py --cache-ram 1" },
};

test("sizes", () => {
  assert.equal(sizeText(512), "512 B");
  assert.equal(sizeText(3 * MiB), "3.0 MiB");
  assert.equal(sizeText(null), "?");
});

test("badge follows the level and says when the agent is missing", () => {
  assert.deepEqual(badge(base).tone, "ok");
  assert.match(badge(base).text, /RAM: ok · 3\.0 GiB free/);
  assert.equal(badge({ ...base, level: "high", eta_s: 42.2 }).tone, "high");
  assert.match(badge({ ...base, level: "high", eta_s: 42.2 }).text, /~42 s left/);
  assert.equal(badge({ ...base, attached: false }).text, "RAM: no agent");
  assert.equal(badge({ ...base, page: false, reason: "boom" }).tone, "off");
  assert.equal(badge(null).text, "RAM: ?");
});

test("a toast only when the level rises to warn or above", () => {
  assert.equal(rise(base, base), null);
  const t = rise(base, { ...base, level: "high", target: 64 * MiB });
  assert.equal(t.severity, "error");
  assert.equal(t.summary, "RAM pressure high");
  assert.match(t.detail, /64\.0 MiB/);
  assert.equal(rise({ ...base, level: "warn" }, { ...base, level: "warn" }), null);
  assert.equal(rise({ ...base, level: "critical" }, { ...base, level: "high" }), null);
  assert.equal(rise(null, { ...base, level: "warn" }).severity, "warn");
  assert.equal(rise(base, { ...base, attached: false, level: "critical" }), null);
});

test("panel lists evictions with their latency", () => {
  const lines = panelLines(base, 1010);
  assert.ok(lines.some((l) => l === "10 s ago: 4:VAEDecode 48.0 MiB (inactive, 12 ms after the command)"), lines);
  assert.ok(lines.some((l) => l.includes("RSS dropped 52.0 MiB")), lines);
  assert.ok(lines.includes("Recommended: python main.py --cache-ram 1"), lines);
});

test("the panel and the badge say what of ComfyUI's own policy is set aside", () => {
  const own = [
    { what: "inactive threshold (24 GB): drops outputs of earlier prompts after every node", state: "set aside while the agent is attached", why: "with room it drops them anyway", now: "set aside" },
    { what: "active headroom (2.4 GB): frees cached outputs", state: "kept", why: "ComfyUI's backstop", now: "kept" },
  ];
  const st = { ...base, own_policy: own, served_in_node: 3, comfy_freed: 2,
               comfyui: { ...base.comfyui, version: "0.33.0" } };
  assert.deepEqual(setAside(st), ["inactive threshold"]);
  assert.match(badge(st).title, /set aside of ComfyUI's own policy: inactive threshold/);
  const lines = panelLines(st, 1010);
  assert.ok(lines.includes("ComfyUI 0.33.0's own RAM policy:"), lines);
  assert.ok(lines.some((l) => l.startsWith("  set aside: inactive threshold (24 GB)")), lines);
  assert.ok(lines.some((l) => l.startsWith("  kept: active headroom")), lines);
  assert.ok(lines.some((l) => l.includes("3 while a node ran")), lines);
  assert.ok(lines.some((l) => l.includes("ComfyUI freed 2 entries itself")), lines);
  // the agent gone: nothing set aside, the rows say whose policy runs
  const alone = { ...st, attached: false, own_policy: own.map((r) => ({ ...r, now: r.now === "set aside" ? "ComfyUI's (no agent)" : r.now })) };
  assert.deepEqual(setAside(alone), []);
  assert.ok(panelLines(alone, 1010).some((l) => l.startsWith("  ComfyUI's (no agent): inactive threshold")));
});
