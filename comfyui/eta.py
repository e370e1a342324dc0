"""The status's forecast: how long until the agent's headroom runs out at
the rate it fell lately (`eta_s` in /ramcache/status and the badge). Pure:
the samples are passed in."""


def eta_seconds(samples, window_s=10.0):
    """Seconds until the agent's headroom reaches 0 at the rate it fell over
    the last window_s, from [(monotonic s, headroom bytes)]; None when it
    does not fall. A least-squares slope: one noisy reading does not swing it."""
    if len(samples) < 3:
        return None
    t_end = samples[-1][0]
    pts = [(t, h) for t, h in samples if t >= t_end - window_s]
    if len(pts) < 3:
        return None
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mh = sum(h for _, h in pts) / n
    var = sum((t - mt) ** 2 for t, _ in pts)
    if var <= 0:
        return None
    slope = sum((t - mt) * (h - mh) for t, h in pts) / var
    if slope >= -1.0:  # bytes per second: flat or rising
        return None
    return max(0.0, pts[-1][1] / -slope)
