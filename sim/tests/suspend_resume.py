"""Suspend and resume an instance of the simulator through the official Python client.

Usage: suspend_resume.py http://127.0.0.1:PORT PROJECT ZONE NAME
Exits 0 when the instance went RUNNING, SUSPENDED, then RUNNING again; else prints why, exits 1.

Operations are polled with a ZoneOperationsClient of the same endpoint: the client's own
`ExtendedOperation.result()` polls through a ZoneOperationsClient it makes without the
client_options, so at the default endpoint.
"""

import sys
import time

from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1


def wait_status(client, project, zone, name, want, timeout=20.0):
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = client.get(project=project, zone=zone, instance=name).status
        if seen == want:
            return
        time.sleep(0.05)
    raise SystemExit(f"{name}: status {seen}, wanted {want}")


def wait_op(ops, project, zone, op, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = ops.get(project=project, zone=zone, operation=op.name)
        if got.status == compute_v1.Operation.Status.DONE:
            if got.error and got.error.errors:
                raise SystemExit(f"operation {op.name} failed: {got.error}")
            return
        time.sleep(0.05)
    raise SystemExit(f"operation {op.name} not DONE after {timeout}s")


def main():
    endpoint, project, zone, name = sys.argv[1:5]
    # A plain-http endpoint: the REST transport keeps the scheme given in api_endpoint.
    options = {
        "transport": "rest",
        "credentials": AnonymousCredentials(),
        "client_options": {"api_endpoint": endpoint},
    }
    client = compute_v1.InstancesClient(**options)
    ops = compute_v1.ZoneOperationsClient(**options)
    body = compute_v1.Instance(
        name=name,
        machine_type=f"zones/{zone}/machineTypes/e2-small",
        metadata=compute_v1.Metadata(
            items=[compute_v1.Items(key="swarming-server", value="https://swarm.example.com")]
        ),
    )
    wait_op(ops, project, zone, client.insert(project=project, zone=zone, instance_resource=body))
    wait_status(client, project, zone, name, "RUNNING")
    wait_op(ops, project, zone, client.suspend(project=project, zone=zone, instance=name))
    wait_status(client, project, zone, name, "SUSPENDED")
    wait_op(ops, project, zone, client.resume(project=project, zone=zone, instance=name))
    wait_status(client, project, zone, name, "RUNNING")
    print("ok")


if __name__ == "__main__":
    main()
