"""Metric formulas: arithmetic over a run's scalars, checked when the study is loaded.

  goodput(0)                         passive "Received Bit Rate" of flow 0, bit/s
  goodput(0) / (goodput(0) + goodput(1))
  scalar("active", 1, "Lost Bytes")  any scalar of either side's .sca file
  scalar("active", 0, "path[1] Mean Cwnd")   a per-path scalar (path ID as netperfmeter numbers it)
  scalar("active", 0, "connection Mean Unacked")   the whole MPTCP connection / SCTP association
  sent(0)                            active "Transmitted Bit Rate" of flow 0
  total_goodput()                    the sum of every flow's goodput
  queue(2, "forward", "drops")       a counter of path 2's queue during the run (bytes,
                                     packets, drops, overlimits; "forward" = active -> passive)
  counter("passive", "UdpSndbufErrors")   a host's MIB counter (nstat) during the run

Only numbers, + - * /, parentheses and these functions are allowed: a study file is data.
"""

import ast
import operator

from .errors import FormulaError  # (expr.FormulaError: its old home)

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
FUNCTIONS = {"goodput": 1, "sent": 1, "scalar": 3, "queue": 3, "counter": 2, "total_goodput": 0, "min": None,
             "max": None}


def compile_formula(text):
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise FormulaError(f"\"{text}\" is not a formula ({e.msg})")
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.Load)) or type(node) in _BINARY or type(node) in _UNARY:
            continue
        if isinstance(node, (ast.BinOp, ast.UnaryOp)) and (type(node.op) in _BINARY or type(node.op) in _UNARY):
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS \
                and not node.keywords:
            arity = FUNCTIONS[node.func.id]
            if arity is not None and len(node.args) != arity:
                raise FormulaError(f"{node.func.id}() takes {arity} argument(s)")
            continue
        if isinstance(node, ast.Name) and node.id in FUNCTIONS:
            continue
        raise FormulaError(f"\"{text}\": only numbers, + - * /, parentheses and {', '.join(FUNCTIONS)}() "
                           "are allowed")
    return tree


def evaluate(tree, scalars, counters=None):
    """scalars: {(side, flow, name): value}; counters: a run's counters.json. Raises KeyError
    naming a missing scalar or counter."""
    counters = counters or {}

    def queue(path, direction, name):
        try:
            return counters["paths"][str(int(path))][direction][name]
        except KeyError:
            raise KeyError(f"no counter \"{name}\" of path {int(path)} ({direction}) in this run")

    def counter(side, name):
        if "nstat" not in counters:
            raise KeyError("this run recorded no MIB counters")
        return counters["nstat"].get(side, {}).get(name, 0)  # unchanged counters are not recorded

    def value(side, flow, name):
        key = (side, int(flow), name)
        if key not in scalars:
            raise KeyError(f"no scalar \"{name}\" of flow {int(flow)} on the {side} side")
        return scalars[key]

    functions = {"goodput": lambda f: value("passive", f, "Received Bit Rate"),
                 "sent": lambda f: value("active", f, "Transmitted Bit Rate"),
                 "scalar": value, "queue": queue, "counter": counter, "min": min, "max": max,
                 "total_goodput": lambda: sum(v for (side, _, name), v in scalars.items()
                                              if side == "passive" and name == "Received Bit Rate")}

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](walk(node.operand))
        if isinstance(node, ast.Call):
            return functions[node.func.id](*(walk(a) for a in node.args))
        raise ValueError("unexpected node")

    return float(walk(tree))
