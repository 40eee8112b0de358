# The Consul contract's acceptance script (shared/research/consul-contract.md, steps 1 to 21),
# run with py-consul and the standard library against the controller's Consul listener.
# Environment: CPORT, CTOKEN, LIMITED (a token that may read nothing), READY_FILE (creating it
# makes web-2 ready), NODE (web-1's node).
import http.client
import json
import os
import threading
import time

import consul
from consul.exceptions import ACLPermissionDenied

port, token = int(os.environ["CPORT"]), os.environ["CTOKEN"]
c = consul.Consul(port=port, token=token)


def raw(method, path, headers=None, body=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request(method, path, body=body, headers=headers or {})
    response = connection.getresponse()
    return response.status, dict((k.lower(), v) for k, v in response.getheaders()), response.read().decode()


auth = {"X-Consul-Token": token}

# 1. The leader is a quoted JSON string.
status, _, body = raw("GET", "/v1/status/leader")
assert status == 200 and json.loads(body), (status, body)
# 2. The three index headers.
_, headers, _ = raw("GET", "/v1/catalog/services", auth)
assert all(h in headers for h in ("x-consul-index", "x-consul-knownleader", "x-consul-lastcontact")), headers
# 3.
i, s = c.catalog.services()
assert int(i) >= 1 and "web" in s and "traefik.enable=true" in s["web"], s
# 4.
i, e = c.health.service("web")
assert {x["Service"]["ID"] for x in e} == {"web-1", "web-2"}, e
assert all({"Node", "Service", "Checks"} <= set(x) for x in e)
# 5.
i, e = c.health.service("web", passing=True)
assert [x["Service"]["ID"] for x in e] == ["web-1"], e
# 6.
assert len(c.health.service("web", tag="traefik.enable=true")[1]) == 2
assert c.health.service("web", tag="nope")[1] == []
# 7.
i, e = c.health.service("does-not-exist")
assert e == [] and int(i) >= 1
# 8.
r = c.catalog.service("web")[1][0]
assert {"ID", "Node", "Address", "Datacenter", "ServiceID", "ServiceName", "ServiceTags", "ServiceAddress",
        "ServicePort", "ServiceMeta", "Namespace"} <= set(r), r
assert r["ServicePort"] == 8080 and r["ServiceMeta"] == {"version": "1"}, r
# 9.
n = c.catalog.nodes()[1]
assert n and all(x["ID"] and x["Node"] and x["Address"] and x["Datacenter"] == "dc1" for x in n), n
assert os.environ["NODE"] in {x["Node"] for x in n}
# 10.
assert c.catalog.datacenters() == ["dc1"]
assert c.agent.self()["Config"]["Datacenter"] == "dc1"
assert c.status.leader()


# 11. Consul's aggregation: maintenance > critical > warning > passing.
def aggregate(checks):
    if any(x["CheckID"] == "_node_maintenance" or x["CheckID"].startswith("_service_maintenance:") for x in checks):
        return "maintenance"
    return next((s for s in ("critical", "warning") if any(x["Status"] == s for x in checks)), "passing")


st = {x["Service"]["ID"]: aggregate(x["Checks"]) for x in c.health.service("web")[1]}
assert st == {"web-1": "passing", "web-2": "critical"}, st
assert all(x["Status"] in ("passing", "warning", "critical") for e in c.health.service("web")[1] for x in e["Checks"])
# 21 (first half, while web-2 is still unready): the critical state lists its check.
status, _, body = raw("GET", "/v1/health/state/critical", auth)
assert status == 200 and any(x["CheckID"] == "service:web-2" for x in json.loads(body)), body
# 12. The timeout path.
i, _ = c.catalog.services()
t = time.time()
j, _ = c.catalog.services(index=i, wait="2s")
d = time.time() - t
assert 1.9 < d < 2.6 and int(j) >= int(i), (d, i, j)
# 13. The wake-up: web-2 becomes ready while both queries are held.
i, _ = c.health.service("web")
si, _ = c.health.state("any")
woken = {}


def hold(name, call):
    t = time.time()
    woken[name] = (call(), time.time() - t)


threads = [
    threading.Thread(target=hold, args=("service", lambda: c.health.service("web", index=i, wait="30s"))),
    threading.Thread(target=hold, args=("state", lambda: c.health.state("any", index=si, wait="30s"))),
]
for thread in threads:
    thread.start()
time.sleep(1)
open(os.environ["READY_FILE"], "w").close()
for thread in threads:
    thread.join()
(j, e), waited = woken["service"]
assert waited < 10 and int(j) > int(i), (waited, i, j)
assert [x["Checks"][-1]["Status"] for x in e] == ["passing", "passing"], e
(sj, _), waited = woken["state"]
assert waited < 10 and int(sj) > int(si), (waited, si, sj)
# 14. The Go client's parameter forms.
status, _, body = raw("GET", "/v1/catalog/services?stale=&cached=&wait=1500ms&index=1", auth)
assert status == 200, (status, body)
# 15. A wrong token.
try:
    consul.Consul(port=port, token="wrong").catalog.services()
    raise SystemExit("a wrong token read the catalog")
except ACLPermissionDenied as error:
    assert "ACL not found" in str(error), error
# 16. Bearer and ?token=.
assert raw("GET", "/v1/catalog/services", {"Authorization": "Bearer " + token})[0] == 200
assert raw("GET", "/v1/catalog/services?token=" + token)[0] == 200
# 17. A token that may read nothing: filtered, and said so.
status, headers, body = raw("GET", "/v1/catalog/services", {"X-Consul-Token": os.environ["LIMITED"]})
assert status == 200 and "web" not in json.loads(body), body
assert headers.get("x-consul-results-filtered-by-acls") == "true", headers
# 18.
assert raw("GET", "/v1/catalog/services?dc=dc9", auth)[::2] == (500, "No path to datacenter")
# 19. Namespaces, by query and by header.
_, _, by_query = raw("GET", "/v1/catalog/services?ns=team-a", auth)
assert "api" in json.loads(by_query) and "web" not in json.loads(by_query), by_query
_, _, by_header = raw("GET", "/v1/catalog/services", dict(auth, **{"X-Consul-Namespace": "team-a"}))
assert by_header == by_query, (by_header, by_query)
_, _, body = raw("GET", "/v1/health/service/api?ns=team-a", auth)
assert json.loads(body) and all(e["Service"]["Namespace"] == "team-a" for e in json.loads(body)), body
# 20. Writes are refused.
status, headers, body = raw("PUT", "/v1/catalog/register", auth, "{}")
assert (status, body) == (405, "method PUT not allowed"), (status, body)
assert headers["content-type"].startswith("text/plain"), headers
# 21 (second half): web-2's check passes now; the datacenters need no token.
status, _, body = raw("GET", "/v1/health/state/passing", auth)
assert status == 200 and any(x["CheckID"] == "service:web-2" for x in json.loads(body)), body
status, _, body = raw("GET", "/v1/catalog/datacenters")
assert (status, json.loads(body)) == (200, ["dc1"]), (status, body)
print("acceptance: 21 steps passed")
