"""Holds Kubernetes objects to the API's own schema, as the official Python client models it.

Reads YAML documents (or one JSON `List`) on stdin. Each object must be of a kind this checks,
with that kind's apiVersion, and must validate against the client's model strictly: no field
the API does not have (at any depth), every required field, every value of its declared type
with no coercion, and nothing lost on the way back (the model dumped again is the object).
Prints one line per object (`ok Kind/name`); on the first failure prints why and exits 1.
"""

import json
import sys

import yaml
import kubernetes.client as k8s

KINDS = {
    ("apps/v1", "Deployment"): k8s.V1Deployment,
    ("v1", "Service"): k8s.V1Service,
    ("v1", "ConfigMap"): k8s.V1ConfigMap,
    ("v1", "Secret"): k8s.V1Secret,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.V1NetworkPolicy,
}


def objects(text):
    text = text.strip()
    if text.startswith("{"):
        document = json.loads(text)
        if document.get("kind") != "List":
            return [document]
        return document["items"]
    return [d for d in yaml.safe_load_all(text) if d is not None]


def main():
    found = objects(sys.stdin.read())
    if not found:
        print("no objects")
        return 1
    for item in found:
        key = (item.get("apiVersion"), item.get("kind"))
        model = KINDS.get(key)
        name = (item.get("metadata") or {}).get("name")
        if model is None:
            print(f"not a kind this checks: {key}")
            return 1
        try:
            parsed = model.model_validate(item, strict=True)
        except Exception as error:  # pydantic's ValidationError says where and why
            print(f"invalid {key[1]}/{name}: {error}")
            return 1
        back = parsed.model_dump(by_alias=True, exclude_none=True, mode="json")
        if back != item:
            print(f"{key[1]}/{name} does not survive the model unchanged:")
            print(json.dumps(back, indent=1, sort_keys=True))
            return 1
        print(f"ok {key[1]}/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
