// Test double of ComfyUI's /scripts/app.js for the browser test: records
// what the extension registers and toasts, and runs its setup().
const seen = { tabs: [], toasts: [], extensions: [] };
window.ramcacheSeen = seen;
export const app = {
  extensionManager: {
    registerSidebarTab(tab) { seen.tabs.push(tab); },
    toast: { add(message) { seen.toasts.push(message); } },
  },
  registerExtension(ext) {
    seen.extensions.push(ext.name);
    Promise.resolve(ext.setup ? ext.setup(app) : undefined).catch((e) => { seen.error = String(e); });
  },
};
