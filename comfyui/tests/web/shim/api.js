// Test double of ComfyUI's /scripts/api.js: fetchApi is fetch on the same origin.
export const api = { fetchApi: (route, options) => fetch(route, options) };
