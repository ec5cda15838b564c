"""Reporters: console (rich), JSON, self-contained HTML and JUnit XML, and the manager that runs them."""

from tracegrade.reporters.base import BaseReporter
from tracegrade.reporters.console import ConsoleReporter, print_report
from tracegrade.reporters.html import HTMLReporter
from tracegrade.reporters.json_reporter import JSONReporter
from tracegrade.reporters.junit import JUnitXMLReporter
from tracegrade.reporters.manager import ReporterManager, ReporterOutput

__all__ = [
    "BaseReporter",
    "ConsoleReporter",
    "HTMLReporter",
    "JSONReporter",
    "JUnitXMLReporter",
    "ReporterManager",
    "ReporterOutput",
    "print_report",
]
