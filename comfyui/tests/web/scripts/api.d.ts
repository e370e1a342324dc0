// What ComfyUI serves at /scripts/api.js, typed by the frontend types package.
import type { ComfyApi } from "@comfyorg/comfyui-frontend-types";
export declare const api: ComfyApi;
