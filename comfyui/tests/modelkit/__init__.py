"""Real model files for real ComfyUI on CPU, offline (see README.md):
stand-ins for the third-party packages Debian 12 lacks (standins/), torch
1.13 shims (torchshims.py), how a ComfyUI process turns them on (boot.py),
the model files (generate.py), prompts that load them (workflow.py) and a
smoke run over every ComfyUI version (smoke.py)."""
