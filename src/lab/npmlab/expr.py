"""Metric formulas: arithmetic over a run's scalars, checked when the study is loaded.

  goodput(0)                         passive "Received Bit Rate" of flow 0, bit/s
  goodput(0) / (goodput(0) + goodput(1))
  scalar("active", 1, "Lost Bytes")  any scalar of either side's .sca file
  scalar("active", 0, "path[1] Mean Cwnd")   a per-path scalar (path ID as netperfmeter numbers it)
  scalar("active", 0, "connection Mean Unacked")   the whole MPTCP connection / SCTP association
  sent(0)                            active "Transmitted Bit Rate" of flow 0

Only numbers, + - * /, parentheses and these functions are allowed: a study file is data.
"""

import ast
import operator

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
FUNCTIONS = {"goodput": 1, "sent": 1, "scalar": 3, "min": None, "max": None}


class FormulaError(Exception):
    pass


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


def evaluate(tree, scalars):
    """scalars: {(side, flow, name): value}. Raises KeyError naming a missing scalar."""

    def value(side, flow, name):
        key = (side, int(flow), name)
        if key not in scalars:
            raise KeyError(f"no scalar \"{name}\" of flow {int(flow)} on the {side} side")
        return scalars[key]

    functions = {"goodput": lambda f: value("passive", f, "Received Bit Rate"),
                 "sent": lambda f: value("active", f, "Transmitted Bit Rate"),
                 "scalar": value, "min": min, "max": max}

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
