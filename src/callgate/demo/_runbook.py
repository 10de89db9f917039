"""The long runbook note (several KB), used to demonstrate result truncation."""

CHECKOUT_RUNBOOK = """\
# Runbook: checkout-api rollback and recovery

Owner: payments platform team. Escalation: #inc-checkout, then the payments
engineering manager on call. Last reviewed after the October incident review.

## 1. When to use this runbook

Use it when a deployment of checkout-api to production causes any of:

- the checkout error rate (HTTP 5xx on /v2/checkout and /v2/payment-intents)
  above 2% for five minutes, or above 5% for one minute;
- p95 latency of /v2/checkout above 1,800 ms for ten minutes;
- the payment success ratio dropping more than three points below the same hour
  of the previous week;
- a data-shape alarm from the order ledger consumer ("unknown field" or
  "schema mismatch" in the ledger-consumer dead letter queue).

Do not use it for incidents that start without a deployment in the previous two
hours: those are usually the payment provider, the database or the network, and
rolling back a healthy release only adds noise. Check the provider status page
and the database dashboard first.

## 2. Before you roll back

1. Find the deployment. Ask the deploy tool for the status of the most recent
   checkout-api deployment (ids look like D-<number>). Note the running version,
   the previous version and when the rollout started.
2. Confirm the timing. The first alert should come after the rollout started. If
   the alert is older than the deployment, stop: the release is not the cause.
3. Check for migrations. Releases that ran a forward-only database migration are
   marked "migration: forward-only" in the release notes. Rolling back the code
   of such a release is safe only if the previous version tolerates the new
   schema; the release notes say so explicitly. When in doubt, page the database
   owner before rolling back.
4. Tell the channel. Post in #inc-checkout: "Rolling back checkout-api <version>
   to <previous version> because <symptom>. Incident commander: <name>." Rolling
   back silently is the most common cause of duplicate rollbacks and of two
   engineers fighting over the same deployment.
5. Freeze further deploys of checkout-api: set the deploy lock in the release
   dashboard so the scheduled train does not redeploy the bad version while you
   work.

## 3. Rolling back

Only on-call engineers may roll back production. The rollback replaces the
running version with the previous version recorded on the deployment; it does
not let you pick an arbitrary version. If the previous version is also bad,
stop and escalate: a forward fix is needed.

- Give a reason that a reader will understand a month from now, e.g. "5xx on
  checkout above 6% since 14:05 after 2.4.0; rolling back to 2.3.2". The reason
  is stored on the deployment and in the audit log.
- A rollback is not idempotent. If the tool answers that the deployment is
  already rolled back, somebody else did it: read the deployment status and
  coordinate in the channel instead of trying again.
- If the rollback call times out, do not call it again. Read the deployment
  status first; the rollback may have completed.

Expected duration: three to six minutes for all regions. Pods are replaced in
batches of 20%; each batch waits for readiness checks (the /healthz endpoint and
a synthetic checkout against the sandbox payment provider).

## 4. After the rollback

1. Watch the checkout dashboard for fifteen minutes. Error rate and latency
   should return to the baseline within five minutes of the last batch.
2. Drain the retry queue. Payment intents that failed during the incident are
   retried automatically for 30 minutes. After that they need the manual replay
   job (payments-replay, dry run first, then with --apply). Never replay the
   same window twice: the replay is idempotent per payment intent id, but
   confirmation emails to customers are not.
3. Check the ledger consumer dead letter queue. Messages written by the bad
   version may need the schema shim; the ledger team owns that decision.
4. Customer communication. If more than 500 checkouts failed, the support lead
   decides on a status page entry. Do not email customers directly from the
   incident; support has templates and legal-approved wording.
5. Keep the deploy lock until the fix is reviewed. Remove it only with the
   release manager's agreement.

## 5. Known failure patterns

- Connection pool exhaustion after a driver upgrade. Symptoms: latency rises
  first, then 5xx with "pool timeout". Rolling back fixes it; the forward fix is
  the pool size setting in the service configuration, not the code.
- Feature flag default flipped. Symptoms: a single payment method failing (for
  example only wallets). Prefer turning the flag off over a rollback: it takes
  seconds and keeps the rest of the release.
- Serialization change in the order event. Symptoms: checkout succeeds but the
  ledger consumer dead-letters every order. Roll back, then ask the ledger team
  to replay the dead letter queue after the shim is deployed.
- Certificate rotation on the payment provider side. Symptoms: every payment
  fails with a TLS error, unrelated to our deployment. Rolling back does not
  help. Escalate to the payment provider's support line in the vendor contacts
  note.

## 6. Contacts and references

- Payments platform on-call: see the on-call rota note.
- Database owner on-call: #db-oncall, pager "database-primary".
- Ledger team: #ledger, business hours; outside them, the ledger on-call pager.
- Release notes: the release dashboard, one page per version.
- Post-incident: open a postmortem note within two working days, with the
  timeline, the deployment id, the rollback reason and the follow-up actions.

## 7. Appendix: checklist

[ ] deployment found and timing confirmed
[ ] migrations checked
[ ] channel told, incident commander named
[ ] deploy lock set
[ ] rollback done by an on-call engineer, with a clear reason
[ ] dashboards watched for fifteen minutes
[ ] retry queue and dead letter queue handled
[ ] support lead informed if more than 500 checkouts failed
[ ] postmortem note opened
"""
