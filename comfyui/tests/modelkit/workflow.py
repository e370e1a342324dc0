"""API prompts (the JSON ComfyUI's POST /prompt takes) that load the
generated model files with ComfyUI's own loader nodes and run them through
text encoding, one small KSampler pass, VAE decoding and a preview, and
the helper that puts the files where a scratch ComfyUI looks for them.

Pure functions, no ComfyUI import: usable from any interpreter."""
import os
import re

# generate.py's file kinds -> ComfyUI's folder_paths names for them.
FOLDER_OF_KIND = {"checkpoint": "checkpoints", "lora": "loras", "text_encoder": "text_encoders",
                  "vae": "vae", "unet": "diffusion_models"}
DEFAULT_TEXT = "a photo of a cat, best quality"
DEFAULT_NEGATIVE = "blurry"


def sampling_nodes(model, clip, vae, text=DEFAULT_TEXT, negative=DEFAULT_NEGATIVE, seed=0,
                   steps=1, size=64, cfg=7.0, sampler="euler", scheduler="normal"):
    """The nodes "10".."15" after the loaders: CLIPTextEncode x2 ->
    EmptyLatentImage @size x @size -> KSampler (@steps) -> VAEDecode ->
    PreviewImage; @model, @clip, @vae are [node id, output index] links.
    @negative None: no second encoder, the positive conditioning serves as
    the negative too (each CLIP-L encode costs seconds on a slow CPU)."""
    nodes = {
        "10": {"class_type": "CLIPTextEncode", "inputs": {"text": text, "clip": clip}},
        "12": {"class_type": "EmptyLatentImage",
               "inputs": {"width": size, "height": size, "batch_size": 1}},
        "13": {"class_type": "KSampler",
               "inputs": {"model": model, "positive": ["10", 0], "negative": ["10", 0],
                          "latent_image": ["12", 0], "seed": seed, "steps": steps, "cfg": cfg,
                          "sampler_name": sampler, "scheduler": scheduler, "denoise": 1.0}},
        "14": {"class_type": "VAEDecode", "inputs": {"samples": ["13", 0], "vae": vae}},
        "15": {"class_type": "PreviewImage", "inputs": {"images": ["14", 0]}},
    }
    if negative is not None:
        nodes["11"] = {"class_type": "CLIPTextEncode", "inputs": {"text": negative, "clip": clip}}
        nodes["13"]["inputs"]["negative"] = ["11", 0]
    return nodes


def checkpoint_prompt(ckpt_name, lora_name=None, lora_strength=1.0, **sampling):
    """CheckpointLoaderSimple @ckpt_name (-> LoraLoader @lora_name on both
    the model and the text encoder, when given) -> sampling_nodes."""
    prompt = {"1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": ckpt_name}}}
    model, clip = ["1", 0], ["1", 1]
    if lora_name:
        prompt["2"] = {"class_type": "LoraLoader",
                       "inputs": {"model": model, "clip": clip, "lora_name": lora_name,
                                  "strength_model": lora_strength,
                                  "strength_clip": lora_strength}}
        model, clip = ["2", 0], ["2", 1]
    prompt.update(sampling_nodes(model, clip, ["1", 2], **sampling))
    return prompt


def split_prompt(unet_name, clip_name, vae_name, clip_type="stable_diffusion", **sampling):
    """UNETLoader @unet_name + CLIPLoader @clip_name (@clip_type) +
    VAELoader @vae_name -> sampling_nodes."""
    prompt = {
        "1": {"class_type": "UNETLoader",
              "inputs": {"unet_name": unet_name, "weight_dtype": "default"}},
        "2": {"class_type": "CLIPLoader", "inputs": {"clip_name": clip_name, "type": clip_type}},
        "3": {"class_type": "VAELoader", "inputs": {"vae_name": vae_name}},
    }
    prompt.update(sampling_nodes(["1", 0], ["2", 0], ["3", 0], **sampling))
    return prompt


def loader_nodes(prompt):
    """The ids of @prompt's model-loading nodes (the ones whose time is
    the load time)."""
    return [i for i, n in prompt.items() if n["class_type"].endswith("Loader")
            or n["class_type"] == "CheckpointLoaderSimple"]


def model_folder(tree, name):
    """The folder under models/ that @tree's folder_paths.py reads first
    for the model kind @name (e.g. "text_encoders" -> "text_encoders",
    "diffusion_models" -> "unet"); @name itself when it says nothing."""
    try:
        with open(os.path.join(tree, "folder_paths.py"), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return name
    m = re.search(r'folder_names_and_paths\["%s"\]\s*=\s*\(\[os\.path\.join\(models_dir,'
                  r'\s*"([^"]+)"\)' % re.escape(name), text)
    return m.group(1) if m else name


def link_models(base, files, tree=None):
    """Symlink generate.py's @files (its report's "files": dicts with kind,
    name, path) into @base/models/<folder>/ (a realcomfy Scratch's base,
    before ComfyUI starts), folders as @tree's folder_paths.py names them.
    {file name: link path}."""
    links = {}
    for f in files:
        kind = FOLDER_OF_KIND[f["kind"]]
        folder = os.path.join(base, "models", model_folder(tree, kind) if tree else kind)
        os.makedirs(folder, exist_ok=True)
        link = os.path.join(folder, f["name"])
        if not os.path.lexists(link):
            os.symlink(f["path"], link)
        links[f["name"]] = link
    return links
