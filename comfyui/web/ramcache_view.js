// @ts-check
// What the ramcache extension shows for one /ramcache/status reply. Pure
// functions, no ComfyUI imports: node's test runner checks them.

/**
 * @typedef {{id: number, label: string, bytes: number, rss_drop: number,
 *            reason: string, latency_ms: number | null, time: number}} Eviction
 * @typedef {{what: string, state: string, why: string, now: string}} OwnPolicy
 * @typedef {{page: boolean, reason: string | null, control: string | null,
 *            attached: boolean, agent_pid: number | null, level: string,
 *            headroom: number | null, target: number | null, eta_s: number | null,
 *            cache: string, entries: number, evicted: number,
 *            evicted_bytes: number, rss_drop: number, settled: number, hooks: string[],
 *            served_in_node?: number, comfy_freed?: number, set_aside_calls?: number,
 *            own_policy?: OwnPolicy[] | null,
 *            last: Eviction[],
 *            comfyui: {version: string | null, cache_type: string,
 *                      recommended: string} | null}} Status
 * @typedef {{text: string, title: string, tone: 'off' | 'ok' | 'warn' | 'high' | 'critical'}} Badge
 */

export const LEVELS = ["ok", "warn", "high", "critical"];

/** @param {string} level */
export function levelRank(level) {
  return LEVELS.indexOf(level);
}

/** @param {number | null | undefined} n */
export function sizeText(n) {
  if (n === null || n === undefined) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v.toFixed(0)} B` : `${v.toFixed(1)} ${units[u]}`;
}

/**
 * The badge for a status, or for a failed request (status null).
 * @param {Status | null} st
 * @returns {Badge}
 */
export function badge(st) {
  if (!st) return { text: "RAM: ?", title: "ramcache: no reply from /ramcache/status", tone: "off" };
  if (!st.page) return { text: "RAM: off", title: `ramcache: ${st.reason || "not started"}`, tone: "off" };
  if (!st.attached) {
    return {
      text: "RAM: no agent",
      title: "ramcache-bpf is not attached: sudo ramcache-bpf --pid <ComfyUI pid>",
      tone: "off",
    };
  }
  const tone = /** @type {Badge['tone']} */ (levelRank(st.level) >= 0 ? st.level : "ok");
  let text = `RAM: ${st.level} · ${sizeText(st.headroom)} free`;
  if (st.eta_s !== null && st.eta_s < 600) text += ` · ~${Math.round(st.eta_s)} s left`;
  let title = `agent pid ${st.agent_pid}; ${st.evicted} evicted`;
  const aside = setAside(st);
  if (aside.length) title += `; set aside of ComfyUI's own policy: ${aside.join(", ")}`;
  return { text, title, tone };
}

/**
 * The parts of ComfyUI's own RAM policy set aside now (while the agent is
 * attached), by their short name.
 * @param {Status} st
 * @returns {string[]}
 */
export function setAside(st) {
  return (st.own_policy || []).filter((r) => r.now === "set aside").map((r) => r.what.split(" (")[0]);
}

/**
 * A toast when the level rises to warn or above; null otherwise.
 * @param {Status | null} prev
 * @param {Status} next
 * @returns {{severity: 'warn' | 'error', summary: string, detail: string} | null}
 */
export function rise(prev, next) {
  if (!next.attached) return null;
  const before = prev && prev.attached ? levelRank(prev.level) : 0;
  const now = levelRank(next.level);
  if (now <= before || now < 1) return null;
  const eta = next.eta_s !== null ? `, about ${Math.round(next.eta_s)} s left at this rate` : "";
  return {
    severity: now >= 2 ? "error" : "warn",
    summary: `RAM pressure ${next.level}`,
    detail: `${sizeText(next.headroom)} headroom${eta}; the agent wants ${sizeText(next.target)} of cached outputs freed.`,
  };
}

/**
 * Lines for the sidebar panel.
 * @param {Status | null} st
 * @param {number} nowS seconds since the epoch
 * @returns {string[]}
 */
export function panelLines(st, nowS) {
  if (!st) return ["No reply from /ramcache/status."];
  const lines = [badge(st).title];
  if (st.attached) {
    lines.push(`Pressure: ${st.level}; headroom ${sizeText(st.headroom)}; wants ${sizeText(st.target)} freed`);
    if (st.eta_s !== null) lines.push(`Headroom gone in about ${Math.round(st.eta_s)} s at the current rate`);
  }
  lines.push(`Cache: ${st.cache}, ${st.entries} entries published`);
  const inNode = st.served_in_node ? `, ${st.served_in_node} while a node ran` : "";
  lines.push(`Evicted ${st.evicted} (${sizeText(st.evicted_bytes)} of entries; RSS dropped ${sizeText(st.rss_drop)})${inNode}`);
  if (st.comfy_freed) lines.push(`ComfyUI freed ${st.comfy_freed} entries itself (taken off the page at once)`);
  for (const ev of [...st.last].reverse()) {
    const lat = ev.latency_ms !== null ? `, ${ev.latency_ms.toFixed(0)} ms after the command` : "";
    lines.push(`${Math.max(0, Math.round(nowS - ev.time))} s ago: ${ev.label} ${sizeText(ev.bytes)} (${ev.reason}${lat})`);
  }
  if (st.own_policy && st.own_policy.length) {
    const v = st.comfyui && st.comfyui.version ? ` ${st.comfyui.version}` : "";
    lines.push(`ComfyUI${v}'s own RAM policy:`);
    for (const r of st.own_policy) lines.push(`  ${r.now}: ${r.what} (${r.why})`);
  }
  if (st.comfyui) lines.push(`Recommended: ${st.comfyui.recommended}`);
  return lines;
}
