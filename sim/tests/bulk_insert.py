"""bulkInsert on the simulator through the official Python client: zonal, then regional.

Usage: bulk_insert.py http://127.0.0.1:PORT PROJECT ZONE
Exits 0 and prints "ok" when a zonal bulk of 2 (namePattern) and a regional one of 2
(perInstanceProperties, targetShape ANY) each ended DONE without error, with 2 instances made
per perLocationStatus and an operationGroupId, and the 4 instances are listed in the zones
their perLocationStatus names; else prints why and exits 1.

Operations are polled with Zone/RegionOperationsClient of the same endpoint (the client's own
ExtendedOperation.result() would poll at the default endpoint).
"""

import sys
import time

from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1


def wait_op(get, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        op = get()
        if op.status == compute_v1.Operation.Status.DONE:
            if op.error and op.error.errors:
                raise SystemExit(f"operation {op.name} failed: {op.error}")
            return op
        time.sleep(0.05)
    raise SystemExit(f"operation not DONE after {timeout}s")


def created(op):
    per = op.instances_bulk_insert_operation_metadata.per_location_status
    return sum(s.created_vm_count for s in per.values())


def main():
    endpoint, project, zone = sys.argv[1:4]
    region = zone.rsplit("-", 1)[0]
    options = {
        "transport": "rest",
        "credentials": AnonymousCredentials(),
        "client_options": {"api_endpoint": endpoint},
    }
    instances = compute_v1.InstancesClient(**options)
    regional = compute_v1.RegionInstancesClient(**options)
    zone_ops = compute_v1.ZoneOperationsClient(**options)
    region_ops = compute_v1.RegionOperationsClient(**options)
    props = compute_v1.InstanceProperties(
        machine_type="e2-small",
        labels={"pool": "py"},
        metadata=compute_v1.Metadata(
            items=[compute_v1.Items(key="swarming-server", value="https://swarm.example.com")]
        ),
    )

    zonal_body = compute_v1.BulkInsertInstanceResource(
        count=2, min_count=2, name_pattern="pyz-##", instance_properties=props
    )
    started = instances.bulk_insert(
        project=project, zone=zone, bulk_insert_instance_resource_resource=zonal_body
    )
    op = wait_op(lambda: zone_ops.get(project=project, zone=zone, operation=started.name))
    if op.operation_type != "bulkInsert" or created(op) != 2 or not op.operation_group_id:
        raise SystemExit(f"zonal bulk: {op}")
    zones = set(op.instances_bulk_insert_operation_metadata.per_location_status)

    regional_body = compute_v1.BulkInsertInstanceResource(
        count=2,
        per_instance_properties={
            "pyr-a": compute_v1.BulkInsertInstanceResourcePerInstanceProperties(),
            "pyr-b": compute_v1.BulkInsertInstanceResourcePerInstanceProperties(),
        },
        instance_properties=props,
        location_policy=compute_v1.LocationPolicy(target_shape="ANY"),
    )
    started = regional.bulk_insert(
        project=project, region=region, bulk_insert_instance_resource_resource=regional_body
    )
    op = wait_op(lambda: region_ops.get(project=project, region=region, operation=started.name))
    if op.operation_type != "bulkInsert" or created(op) != 2 or not op.region.endswith(region):
        raise SystemExit(f"regional bulk: {op}")
    zones |= set(op.instances_bulk_insert_operation_metadata.per_location_status)

    names = sorted(
        i.name
        for key in zones
        for i in instances.list(project=project, zone=key.removeprefix("zones/"))
    )
    if names != ["pyr-a", "pyr-b", "pyz-01", "pyz-02"]:
        raise SystemExit(f"instances in {sorted(zones)}: {names}")
    print("ok")


if __name__ == "__main__":
    main()
