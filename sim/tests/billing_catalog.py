"""List Compute Engine's SKUs from the simulator through the official Python client.

Usage: billing_catalog.py http://127.0.0.1:PORT EXPECTED_SKU_IDS_COMMA_SEPARATED
Exits 0 and prints ok when CloudCatalogClient (REST transport) lists Compute Engine among the
services and walks every SKU once in pages of 7, in the order given, each with the fields the
service reads; else prints why and exits 1.
"""

import sys

from google.auth.credentials import AnonymousCredentials
from google.cloud import billing_v1


def main():
    endpoint, expected = sys.argv[1], sys.argv[2].split(",")
    # A plain-http endpoint: the REST transport keeps the scheme given in api_endpoint.
    client = billing_v1.CloudCatalogClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": endpoint},
    )
    services = [s.display_name for s in client.list_services()]
    if services != ["Compute Engine"]:
        raise SystemExit(f"services: {services}")
    pages = client.list_skus(
        request=billing_v1.ListSkusRequest(parent="services/6F81-5844-456A", page_size=7)
    ).pages
    seen = []
    for page in pages:
        if len(page.skus) > 7:
            raise SystemExit(f"a page of {len(page.skus)} SKUs, asked for 7")
        for sku in page.skus:
            info = sku.pricing_info[0]
            rate = info.pricing_expression.tiered_rates[0].unit_price
            if rate.currency_code != "USD" or not sku.service_regions or not sku.category.usage_type:
                raise SystemExit(f"{sku.sku_id}: incomplete: {sku}")
            if sku.name != f"services/6F81-5844-456A/skus/{sku.sku_id}":
                raise SystemExit(f"{sku.sku_id}: name {sku.name}")
            if rate.units == 0 and rate.nanos == 0 and sku.category.resource_family == "Compute":
                raise SystemExit(f"{sku.sku_id}: free compute")
            seen.append(sku.sku_id)
    if seen != expected:
        raise SystemExit(f"walked {len(seen)} SKUs, expected {len(expected)}: {seen}")
    print("ok")


if __name__ == "__main__":
    main()
