"""The einops pattern language, parsed into a plan of torch operations.

A side of a pattern is a list of groups; a group is a list of axes (a
name, an anonymous length such as 1 or 3, or the ellipsis); "(h w)" is a
group of two, "()" a group of none (length 1), a bare "b" a group of one.
A plan says how to get from a tensor of one shape to the result:
reshape to the left side's elementary axes, reduce the axes the right side
lacks, permute the kept axes into the right side's order, insert and
expand the right side's new axes, reshape to the right side's groups.
Plans are cached per (operation, pattern, shape, axis lengths).
"""
import functools
import math
import re

ELLIPSIS = "..."
TOKEN = re.compile(r"\s*(\.\.\.|\(|\)|[A-Za-z_][A-Za-z0-9_]*|\d+)")


class EinopsError(ValueError):
    """A pattern that does not fit the tensor or the operation."""


def parse_side(text):
    """The groups of one side of a pattern: [[axis, ...], ...], where an
    axis is a name, an int (an anonymous length) or ELLIPSIS ("(...)");
    a bare "..." is ELLIPSIS in place of a group."""
    groups, current, pos = [], None, 0
    text = text.replace("\u2026", ELLIPSIS).rstrip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise EinopsError(f"unexpected character in {text!r} at {pos}")
        tok, pos = m.group(1), m.end()
        if tok == "(":
            if current is not None:
                raise EinopsError(f"nested parentheses in {text!r}")
            current = []
        elif tok == ")":
            if current is None:
                raise EinopsError(f"unbalanced parentheses in {text!r}")
            groups.append(current)
            current = None
        else:
            axis = int(tok) if tok.isdigit() else tok
            if current is None:
                groups.append(ELLIPSIS if axis == ELLIPSIS else [axis])
            else:
                current.append(axis)
    if current is not None:
        raise EinopsError(f"unbalanced parentheses in {text!r}")
    return groups


def split_pattern(pattern):
    if pattern.count("->") != 1:
        raise EinopsError(f"pattern {pattern!r} needs exactly one '->'")
    left, right = pattern.split("->")
    return parse_side(left), parse_side(right)


def names_of(groups):
    """The named axes of a side, in order, each once (or an error)."""
    seen = [a for g in groups for a in g if isinstance(a, str) and a != ELLIPSIS]
    if len(seen) != len(set(seen)):
        raise EinopsError(f"an axis is named twice in {groups}")
    return seen


def expand_ellipsis(left, right, ndim):
    """Both sides with the ellipsis replaced by as many axes ('...0',
    '...1', ...) as it covers in a tensor of @ndim dimensions."""
    if any(g != ELLIPSIS and ELLIPSIS in g for g in left):
        raise EinopsError("ellipsis inside parentheses on the left side")
    dots = [i for i, g in enumerate(left) if g == ELLIPSIS]
    if not dots:
        if any(ELLIPSIS in g for g in right):
            raise EinopsError("ellipsis on the right side only")
        return left, right
    if len(dots) > 1:
        raise EinopsError("more than one ellipsis on the left side")
    count = ndim - (len(left) - 1)
    if count < 0:
        raise EinopsError(f"pattern has more axes than the tensor's {ndim}")
    covered = [f"{ELLIPSIS}{i}" for i in range(count)]
    new_left = left[:dots[0]] + [[a] for a in covered] + left[dots[0] + 1:]
    new_right = []
    for g in right:
        if g == ELLIPSIS:
            new_right += [[a] for a in covered]
        else:
            new_right.append([x for a in g for x in (covered if a == ELLIPSIS else [a])])
    return new_left, new_right


def left_lengths(left, shape, known):
    """{axis: length} for every elementary axis of the left side, solving
    each group's one unknown length from the dimension it makes up.
    Anonymous axes are keyed ('#', group index, position)."""
    if len(left) != len(shape):
        raise EinopsError(f"pattern has {len(left)} axes, tensor has {len(shape)} dimensions")
    lengths = {}
    for gi, (group, dim) in enumerate(zip(left, shape)):
        keys = [("#", gi, i) if isinstance(a, int) else a for i, a in enumerate(group)]
        fixed = {k: (a if isinstance(a, int) else known.get(a)) for k, a in zip(keys, group)}
        unknown = [k for k, v in fixed.items() if v is None]
        product = math.prod(v for v in fixed.values() if v is not None)
        if len(unknown) > 1:
            raise EinopsError(f"cannot infer the lengths of {unknown} from {dim}")
        if unknown:
            if product == 0 or dim % product:
                raise EinopsError(f"dimension {dim} does not divide into {group}")
            fixed[unknown[0]] = dim // product
        elif product != dim:
            raise EinopsError(f"dimension {dim} is not {group} = {product}")
        lengths.update(fixed)
    return lengths


@functools.lru_cache(maxsize=4096)
def plan(op, pattern, shape, axes):
    """The steps for @op ('rearrange', 'repeat' or 'reduce') of @pattern
    on a tensor of @shape with axis lengths @axes (sorted items): a dict
    of reshape_in, reduce (dims), permute, unsqueeze_shape, expand,
    reshape_out (each None when not needed)."""
    left, right = expand_ellipsis(*split_pattern(pattern), len(shape))
    lnames, rnames = names_of(left), names_of(right)
    check_sides(op, lnames, rnames, right, dict(axes))
    lengths = left_lengths(left, shape, dict(axes))
    elementary = [("#", gi, i) if isinstance(a, int) else a
                  for gi, g in enumerate(left) for i, a in enumerate(g)]
    kept = [a for a in elementary if a in rnames]
    dropped = [i for i, a in enumerate(elementary) if a not in rnames]
    if op != "reduce" and any(lengths[elementary[i]] != 1 for i in dropped):
        raise EinopsError(f"{op} cannot drop axes of length > 1 in {pattern!r}")
    return build_steps(op, elementary, kept, dropped, right, lengths, dict(axes))


def check_sides(op, lnames, rnames, right, axes):
    """The operation's rules on which names may appear on one side only."""
    only_left = set(lnames) - set(rnames)
    only_right = [a for a in rnames if a not in lnames]
    anon_right = [a for g in right for a in g if isinstance(a, int)]
    if op == "rearrange" and (only_left or only_right):
        raise EinopsError(f"rearrange needs the same axes on both sides: {only_left or only_right}")
    if op != "repeat" and (only_right or any(a != 1 for a in anon_right)):
        raise EinopsError(f"{op} cannot add axes {only_right or anon_right}")
    if op == "repeat" and only_left:
        raise EinopsError(f"repeat cannot remove axes {only_left}")
    missing = [a for a in only_right if a not in axes]
    if missing:
        raise EinopsError(f"lengths of new axes {missing} not given")


def build_steps(op, elementary, kept, dropped, right, lengths, axes):
    """The plan's torch steps (see plan)."""
    steps = {"reshape_in": None, "reduce": None, "permute": None,
             "unsqueeze_shape": None, "expand": None, "reshape_out": None}
    if op == "reduce":
        steps["reshape_in"] = [lengths[a] for a in elementary]
        steps["reduce"] = dropped or None
    else:
        steps["reshape_in"] = [lengths[a] for a in kept]
    order = [a for g in right for a in g if a in kept]
    perm = [kept.index(a) for a in order]
    if perm != list(range(len(perm))):
        steps["permute"] = perm
    flat = [a for g in right for a in g]
    final = [lengths[a] if a in kept else (a if isinstance(a, int) else axes[a]) for a in flat]
    if len(flat) != len(order):
        steps["unsqueeze_shape"] = [lengths[a] if a in kept else 1 for a in flat]
        if final != steps["unsqueeze_shape"]:
            steps["expand"] = final
    out, i = [], 0
    for g in right:
        out.append(math.prod(final[i:i + len(g)]))
        i += len(g)
    steps["reshape_out"] = out
    return steps
