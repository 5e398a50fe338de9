"""The lab's errors, in one place (the modules that raised them first re-export them under their
old names: topology.LabError, study.StudyError, expr.FormulaError, runner.Interrupted).

LabError: what stops a command (a test bed that cannot be built, a run that failed every attempt,
a tool missing); its str() is the one line to print. StudyError: a study file that is not one,
naming the file, the line and the key. FormulaError: a metric formula that is not one (study.py
turns it into a StudyError with its key). Interrupted: a signal (SIGINT, SIGTERM, SIGHUP) during
a study's runs: the complete runs are kept, the one in progress is discarded.
"""


class LabError(Exception):
    pass


class StudyError(Exception):
    pass


class FormulaError(Exception):
    pass


class Interrupted(Exception):
    pass
