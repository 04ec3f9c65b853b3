"""backoffice: the back office (``/v1/`` JSON API, ``/ui/`` pages) as its own HTTP function.

Not a pipeline stage: it consumes no topic and publishes none; it reads what the stages keep and
steers it (rules, review decisions, conflicts, delivery retries, run cancel). Its Cloud Run service
admits only ``var.backoffice_invokers`` (terraform/backoffice.tf); the code then wants the operator
bearer or a site token.
"""

import flask
import functions_framework

from gleaner.cloud import entry

entry.setup_logging()


@functions_framework.http
def on_http(request: flask.Request) -> flask.Response:
    return entry.run_backoffice(request)
