// What ComfyUI serves at /scripts/app.js, typed by the frontend types package.
import type { ComfyApp } from "@comfyorg/comfyui-frontend-types";
export declare const app: ComfyApp;
