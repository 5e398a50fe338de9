"""A study's verdict rules ([[verdict]] rows, fixed in the study file before its runs) and their
application to the runs: which claim of the paper each rule tests, on which metric, between which
cells, in which direction and with what size; the verdict each gets (netperfmeter-lab(1),
VERDICTS).

A rule's cells are the study's combinations that match `arm`; each is compared with its partner,
the same combination with `against`'s values (paired by repetition: a repetition runs every
combination once), or with the rule's `band` alone when there is no `against`. Per cell:

  the test     the exact sign-flip test (stats.sign_flip_p) of the paired differences arm -
               against in the expected direction, and in the opposite one; for direction
               "within", two one-sided tests that the mean (of the differences, or of the metric
               without `against`) lies above band[0] and below band[1] (the larger p), and that
               it lies outside (twice the smaller p of the opposite ones). Holm's correction
               across the rule's cells, each family (expected, opposite) on its own, at the
               rule's alpha.
  the size     the effect's BCa interval (stats.interval): the mean difference, the ratio of the
               means (effect = "ratio"), or the mean itself (no `against`); it "meets" the band
               when it overlaps it, is "outside" when it does not, "unknown" without an interval.

The verdict of a rule:
  not reproduced      a cell shows the opposite (Holm-adjusted p < alpha), or a cell whose test
                      shows nothing has an interval outside the band: the data rule out the
                      paper's effect there.
  inconclusive        otherwise, when a cell has fewer than MIN_PAIRS pairs of valid runs, when
                      the rule has no cell in this form of the study, or when a cell's test shows
                      nothing and its size does not rule out the paper's.
  reproduced          every cell shows the expected direction (or, "within", the value inside the
                      band) and every cell's interval meets the band (a rule without a band claims
                      a direction only).
  reproduced in direction only
                      every cell shows the expected direction, and the size is outside the band in
                      a cell or not determined (too few runs for an interval).
"""

import json
import math

from . import stats

VERDICTS = ("reproduced", "reproduced in direction only", "not reproduced", "inconclusive")
DIRECTIONS = ("greater", "less", "within")
EFFECTS = ("difference", "ratio")
KNOWN = {"claim", "source", "metric", "arm", "against", "where", "direction", "effect", "band", "paper", "test",
         "alpha"}
# A sign-flip test of 4 pairs cannot reach p < 1/16: below 5 pairs a cell is "too few runs".
MIN_PAIRS = 5
LEVEL = 0.95


def pairs_needed(cells, alpha):
    """The fewest pairs per cell with which the exact sign-flip test can pass Holm's first step
    over `cells` cells at `alpha`: 2^-n < alpha / cells."""
    return max(MIN_PAIRS, math.floor(math.log2(cells / alpha)) + 1)


def parse(checker, study, data, full_sweep):
    """study.verdicts from the study file's [[verdict]] rows; a bad row fails with its file, line
    and key (checker.fail raises StudyError)."""
    names = {m.name for m in study.metrics}
    rules = []
    for i, row in enumerate(checker.tables(data, "verdict", KNOWN)):
        key = f"verdict[{i + 1}]"
        for needed in ("claim", "metric", "arm", "direction"):
            if needed not in row:
                checker.fail(key, f"needs {needed} (known: {', '.join(sorted(KNOWN))})")
        claim = checker.expect(f"{key}.claim", row["claim"], str, "the paper's claim, as text")
        if row["metric"] not in names:
            checker.fail(f"{key}.metric", f"\"{row['metric']}\" is not a metric of the study")
        direction = row["direction"]
        if direction not in DIRECTIONS:
            checker.fail(f"{key}.direction", f"\"{direction}\" is not one of {', '.join(DIRECTIONS)}")
        cells = {}
        for part in ("arm", "against", "where"):
            if part not in row:
                continue
            table = checker.expect(f"{key}.{part}", row[part], dict, "a table of variable = value")
            if part != "where" and not table:
                checker.fail(f"{key}.{part}", "names no variable")
            for var, value in table.items():
                if var not in study.sweep:
                    checker.fail(f"{key}.{part}", f"\"{var}\" is not a variable of the sweep")
                wanted = value if part == "where" and isinstance(value, list) else [value]
                for v in wanted:
                    if str(v) not in map(str, full_sweep.get(var, study.sweep[var])):
                        checker.fail(f"{key}.{part}", f"\"{v}\" is not a value of the sweep's {var} "
                                     f"({', '.join(map(str, full_sweep.get(var, study.sweep[var])))})")
            cells[part] = {var: [str(v) for v in value] if part == "where" and isinstance(value, list)
                           else str(value) for var, value in table.items()}
        arm, against, where = cells["arm"], cells.get("against"), cells.get("where", {})
        if against is not None:
            if set(against) - set(arm):
                checker.fail(f"{key}.against", "sets a variable that arm does not (the partner of each cell is "
                             "the arm's combination with against's values)")
            if all(arm[v] == against[v] for v in against):
                checker.fail(f"{key}.against", "is the arm itself")
        if set(where) & set(arm):
            checker.fail(f"{key}.where", "restricts a variable that arm fixes")
        effect = row.get("effect", "difference")
        if effect not in EFFECTS:
            checker.fail(f"{key}.effect", f"\"{effect}\" is not one of {', '.join(EFFECTS)}")
        if against is None and "effect" in row:
            checker.fail(f"{key}.effect", "needs against (without it the effect is the metric itself)")
        band = row.get("band")
        if band is not None:
            if not (isinstance(band, list) and len(band) == 2 and
                    all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in band) and band[0] < band[1]):
                checker.fail(f"{key}.band", "must be [low, high] with low < high (the effect's sizes the paper's "
                             "value admits)")
            band = [float(band[0]), float(band[1])]
        if direction == "within" and band is None:
            checker.fail(f"{key}.band", "is needed with direction = \"within\"")
        if direction == "within" and effect == "ratio":
            checker.fail(f"{key}.effect", "direction = \"within\" tests the difference (or the metric itself)")
        if direction != "within" and against is None:
            checker.fail(f"{key}.against", f"is needed with direction = \"{direction}\" (what the arm is "
                         "greater or less than)")
        paper = row.get("paper")
        if paper is not None:
            if isinstance(paper, bool) or not isinstance(paper, (int, float)):
                checker.fail(f"{key}.paper", "must be a number (the paper's value of the effect)")
            if band is not None and not band[0] <= paper <= band[1]:
                checker.fail(f"{key}.paper", f"{paper} lies outside its band {band}")
        if row.get("test", "sign-flip") != "sign-flip":
            checker.fail(f"{key}.test", f"\"{row['test']}\" is not a test of the lab (sign-flip)")
        alpha = row.get("alpha", 0.05)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
            checker.fail(f"{key}.alpha", "must be a number between 0 and 0.5")
        rules.append({"key": key, "claim": claim, "source": str(row.get("source", "")), "metric": row["metric"],
                      "arm": arm, "against": against, "where": where, "direction": direction, "effect": effect,
                      "band": band, "paper": None if paper is None else float(paper), "test": "sign-flip",
                      "alpha": float(alpha)})
    study.verdicts = rules


def _matches(values, fixed):
    return all(str(values[v]) == want for v, want in fixed.items())


def _label(values):
    return ",".join(f"{k}={v}" for k, v in values.items())


def _meets(low, high, band):
    if low is None:
        return "unknown"
    return "meets" if low <= band[1] and high >= band[0] else "outside"


def rule_cells(rule, combinations):
    """[(the combination, its partner's label or None)] of the cells a rule compares among the
    study's combinations (a cell whose partner the study excludes is none)."""
    labels = {_label(c) for c in combinations}
    out = []
    for values in combinations:
        if not _matches(values, rule["arm"]) or \
                not all(str(values[v]) in want for v, want in rule["where"].items()):
            continue
        partner_label = None
        if rule["against"] is not None:
            partner = dict(values, **rule["against"])
            partner_label = _label({k: partner[k] for k in values})
            if partner_label not in labels:
                continue
        out.append((values, partner_label))
    return out


def power(study, repetitions):
    """Lines for --dry-run: for each rule, its cells and the pairs per cell that can show its claim
    (pairs_needed), against the repetitions the run makes: with fewer, the rule can only say
    inconclusive."""
    combinations = list(study.combinations())
    lines = []
    for rule in study.verdicts:
        cells = len(rule_cells(rule, combinations))
        if not cells:
            lines.append(f"  {rule['key']}: no cell in this form of the study (inconclusive)")
            continue
        need = pairs_needed(cells, rule["alpha"])
        enough = "can show it" if repetitions >= need else "too few: it can only be inconclusive"
        lines.append(f"  {rule['key']}: {cells} cell{'s' if cells > 1 else ''}, {need} pairs per cell needed "
                     f"(alpha {rule['alpha']:g}, Holm): {repetitions} repetitions {enough}")
    return lines


def judge_rule(rule, combinations, measured, seed):
    """The verdict of one rule: {"verdict", "reason", "cells": [...]} from `measured`,
    {(combination label, repetition): {metric: value}} of the valid runs."""
    metric, band, alpha = rule["metric"], rule["band"], rule["alpha"]
    cells = []
    for values, partner_label in rule_cells(rule, combinations):
        cell = {"cell": _label(values)}
        mine = {rep: m[metric] for (lab, rep), m in measured.items() if lab == cell["cell"] and metric in m}
        if partner_label is not None:
            cell["against"] = partner_label
            theirs = {rep: m[metric] for (lab, rep), m in measured.items() if lab == partner_label and metric in m}
            reps = sorted(set(mine) & set(theirs))
            a, b = [mine[r] for r in reps], [theirs[r] for r in reps]
            cell["pairs"] = len(reps)
            d = [x - y for x, y in zip(a, b)]
            key = (seed, rule["key"], cell["cell"])
            if rule["effect"] == "ratio":
                got = stats.interval(list(zip(a, b)), LEVEL, key, statistic=_ratio)
            else:
                got = stats.interval(d, LEVEL, key)
            if rule["direction"] == "within":
                cell["p"], cell["p_opposite"] = _within(d, band, key)
            else:
                expected = rule["direction"]
                opposite = "less" if expected == "greater" else "greater"
                cell["p"] = stats.sign_flip_p(d, expected, key) if d else 1.0
                cell["p_opposite"] = stats.sign_flip_p(d, opposite, key) if d else 1.0
        else:
            reps = sorted(mine)
            x = [mine[r] for r in reps]
            cell["pairs"] = len(x)
            key = (seed, rule["key"], cell["cell"])
            got = stats.interval(x, LEVEL, key)
            cell["p"], cell["p_opposite"] = _within(x, band, key)
        cell.update(estimate=got["estimate"], low=got["low"], high=got["high"], interval=got["procedure"])
        cell["size"] = _meets(got["low"], got["high"], band) if band is not None else "no band"
        cells.append(cell)
    if not cells:
        return {"verdict": "inconclusive", "reason": "no cell of the rule in this form of the study", "cells": []}
    enough = [c for c in cells if c["pairs"] >= MIN_PAIRS]
    for name in ("p", "p_opposite"):
        for c, adjusted in zip(enough, stats.holm([c[name] for c in enough])):
            c[name + "_holm"] = adjusted
    for c in cells:
        if c["pairs"] < MIN_PAIRS:
            c["outcome"] = f"too few runs ({c['pairs']} < {MIN_PAIRS} pairs)"
        elif c["p_opposite_holm"] < alpha:
            c["outcome"] = "opposite"
        elif c["p_holm"] < alpha:
            c["outcome"] = "expected"
        else:
            c["outcome"] = "nothing shown"
    need = pairs_needed(len(cells), alpha)
    opposite = [c["cell"] for c in cells if c["outcome"] == "opposite"]
    ruled_out = [c["cell"] for c in cells if c["outcome"] == "nothing shown" and c["size"] == "outside"]
    few = [c["cell"] for c in cells if c["outcome"].startswith("too few")]
    null = [c["cell"] for c in cells if c["outcome"] == "nothing shown"]
    what = "inside the band" if rule["direction"] == "within" else "in the expected direction"
    if opposite:
        return {"verdict": "not reproduced", "cells": cells,
                "reason": f"the opposite shown in {', '.join(opposite)} (Holm, alpha {alpha})"}
    if ruled_out:
        return {"verdict": "not reproduced", "cells": cells,
                "reason": f"nothing shown and the size outside the band {band} in {', '.join(ruled_out)}"}
    if few:
        return {"verdict": "inconclusive", "cells": cells,
                "reason": f"too few pairs of valid runs in {', '.join(few)} (at least {MIN_PAIRS}; "
                          f"{need} per cell for {len(cells)} cells at alpha {alpha})"}
    if null:
        return {"verdict": "inconclusive", "cells": cells,
                "reason": f"nothing shown {what} in {', '.join(null)} (Holm, alpha {alpha}; {need} pairs per cell "
                          "can show it)"}
    if band is None or all(c["size"] == "meets" for c in cells):
        return {"verdict": "reproduced", "cells": cells,
                "reason": f"{what} in all {len(cells)} cells (Holm, alpha {alpha})" +
                          (f", every interval meets the band {band}" if band is not None else "")}
    outside = [c["cell"] for c in cells if c["size"] == "outside"]
    unknown = [c["cell"] for c in cells if c["size"] == "unknown"]
    return {"verdict": "reproduced in direction only", "cells": cells,
            "reason": f"in the expected direction in all {len(cells)} cells (Holm, alpha {alpha}); the size " +
                      (f"outside the band {band} in {', '.join(outside)}" if outside else "") +
                      ("; " if outside and unknown else "") +
                      (f"undetermined in {', '.join(unknown)} (too few runs for an interval)" if unknown else "")}


def _within(x, band, key):
    """(p inside, p outside) of a sample's mean against a band: the larger p of the two one-sided
    tests above band[0] and below band[1], and twice the smaller of the opposite ones."""
    if not x:
        return 1.0, 1.0
    lo, hi = band
    above, below = [v - lo for v in x], [v - hi for v in x]
    inside = max(stats.sign_flip_p(above, "greater", key), stats.sign_flip_p(below, "less", key))
    outside = min(1.0, 2 * min(stats.sign_flip_p(above, "less", key), stats.sign_flip_p(below, "greater", key)))
    return inside, outside


def _ratio(pairs):
    below = sum(b for _, b in pairs)
    return sum(a for a, _ in pairs) / below if below else math.nan


def apply(study, rows, seed):
    """[{rule..., "verdict", "reason", "cells"}] of every rule of the study, from the summary's
    rows [(values, repetition, metrics, validity, problems)] (invalid runs left out)."""
    measured = {(_label(values), rep): metrics for values, rep, metrics, validity, _ in rows if validity != "invalid"}
    combinations = list(study.combinations())
    return [dict(rule, **judge_rule(rule, combinations, measured, seed)) for rule in study.verdicts]


def write(path, verdicts, seed):
    """verdicts.json: the rules as the study file fixed them, each with its verdict and cells."""
    with open(path, "w") as f:
        json.dump({"seed": seed, "verdicts": verdicts}, f, indent=1, default=str)
        f.write("\n")
