/**
 * The deployment examples (deploy/): the Kubernetes manifests parse and pass the Kubernetes API
 * schemas (npm kubernetes-models), have the shape docs/scale-out.md describes, and embed the nginx files of
 * deploy/nginx/ unchanged; the standalone nginx configuration passes `nginx -t`. No cluster is
 * started here: what a cluster would do with the manifests is not tested.
 *
 * @module
 */
import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import process from "node:process";
import { findNginx } from "./_nginx.ts";

const DEPLOY = new URL("../deploy/", import.meta.url).pathname;

// deno-lint-ignore no-explicit-any
type Doc = any;

// The schema library loads Node's deprecated `punycode`; its warning would be the one non-JSON line
// of the test run's stderr.
(process as unknown as { noDeprecation: boolean }).noDeprecation = true;
const models = {
  "v1/Namespace": (await import("kubernetes-models/v1/Namespace")).Namespace,
  "v1/Service": (await import("kubernetes-models/v1/Service")).Service,
  "v1/ConfigMap": (await import("kubernetes-models/v1/ConfigMap")).ConfigMap,
  "apps/v1/StatefulSet": (await import("kubernetes-models/apps/v1/StatefulSet")).StatefulSet,
  "apps/v1/Deployment": (await import("kubernetes-models/apps/v1/Deployment")).Deployment,
  "policy/v1/PodDisruptionBudget": (await import("kubernetes-models/policy/v1/PodDisruptionBudget"))
    .PodDisruptionBudget,
};
const MODELS = models as unknown as Record<string, new (value: Doc) => { validate(): void }>;

function manifests(): Map<string, Doc[]> {
  const out = new Map<string, Doc[]>();
  for (const entry of Deno.readDirSync(`${DEPLOY}kubernetes`)) {
    if (!entry.name.endsWith(".yaml") || entry.name === "kustomization.yaml") continue;
    const docs = parseAllDocuments(Deno.readTextFileSync(`${DEPLOY}kubernetes/${entry.name}`));
    out.set(
      entry.name,
      docs.map((doc) => {
        assert.deepEqual(doc.errors, [], `${entry.name}: ${doc.errors}`);
        return doc.toJS();
      }),
    );
  }
  return out;
}

const all = [...manifests().values()].flat();
const find = (kind: string, name: string): Doc => {
  const doc = all.find((d) => d.kind === kind && d.metadata.name === name);
  assert.ok(doc, `no ${kind} ${name}`);
  return doc;
};

Deno.test("every Kubernetes manifest parses and passes the Kubernetes API schema of its kind", () => {
  assert.ok(all.length >= 7, `${all.length} objects`);
  for (const doc of all) {
    const model = MODELS[`${doc.apiVersion}/${doc.kind}`];
    assert.ok(model, `no schema for ${doc.apiVersion} ${doc.kind}`);
    new model(doc).validate();
    // A schema that checks something: a wrong type fails.
    assert.throws(() => new model({ ...doc, metadata: { ...doc.metadata, name: 7 } }).validate(), doc.kind);
    if (doc.kind !== "Namespace") assert.equal(doc.metadata.namespace, "code-mode", doc.metadata.name);
  }
  const kustomization = parseAllDocuments(Deno.readTextFileSync(`${DEPLOY}kubernetes/kustomization.yaml`))[0]
    .toJS();
  assert.deepEqual([...kustomization.resources].sort(), [...manifests().keys()].sort());
});

Deno.test("the StatefulSet's hosts take their pod name as route token, with probes and limits on every container", () => {
  const hosts = find("StatefulSet", "code-mode-host");
  const [host] = hosts.spec.template.spec.containers;
  assert.ok(host.args.includes("--route-token=$(POD_NAME)"), host.args.join(" "));
  assert.deepEqual(host.env.find((e: Doc) => e.name === "POD_NAME").valueFrom, {
    fieldRef: { fieldPath: "metadata.name" },
  });
  assert.equal(hosts.spec.serviceName, "code-mode-host");
  assert.equal(find("Service", "code-mode-host").spec.publishNotReadyAddresses, true);
  assert.equal(find("Service", "code-mode-host-ready").spec.publishNotReadyAddresses, undefined);
  for (const workload of [hosts, find("Deployment", "code-mode-nginx")]) {
    for (const container of workload.spec.template.spec.containers) {
      assert.ok(container.readinessProbe && container.livenessProbe, container.name);
      assert.ok(container.resources.limits.memory && container.resources.limits.cpu, container.name);
      assert.equal(container.securityContext.allowPrivilegeEscalation, false, container.name);
    }
  }
  assert.equal(host.readinessProbe.grpc.port, 50051);
});

Deno.test("the StatefulSet's host flags are flags the host accepts", async () => {
  const [host] = find("StatefulSet", "code-mode-host").spec.template.spec.containers;
  const args = host.args.map((a: string) => a.replace("$(POD_NAME)", "code-mode-host-0"));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-all", new URL("../cli/main.ts", import.meta.url).pathname, ...args, "--help"],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
});

Deno.test("the nginx ConfigMap embeds deploy/nginx's routing and locations unchanged, and one route upstream per host pod", () => {
  const config = find("ConfigMap", "code-mode-nginx").data;
  for (const name of ["code-mode-routing.conf", "code-mode-locations.conf"]) {
    assert.equal(config[name], Deno.readTextFileSync(`${DEPLOY}nginx/${name}`), name);
  }
  const replicas = find("StatefulSet", "code-mode-host").spec.replicas;
  const routes = [...config["code-mode-hosts.conf"].matchAll(/upstream (route_\S+) \{/g)].map((m) => m[1]);
  assert.deepEqual(routes, Array.from({ length: replicas }, (_, i) => `route_code-mode-host-${i}`));
  assert.match(config["code-mode-hosts.conf"], /upstream code_mode_hosts \{[^}]*code-mode-host-ready\./);
});

Deno.test("deploy/nginx/nginx.conf, the standalone configuration, passes nginx -t", async () => {
  const prefix = await Deno.makeTempDir();
  try {
    for (const entry of Deno.readDirSync(`${DEPLOY}nginx`)) {
      await Deno.copyFile(`${DEPLOY}nginx/${entry.name}`, `${prefix}/${entry.name}`);
    }
    const out = await new Deno.Command(findNginx(), {
      args: ["-t", "-p", prefix, "-c", `${prefix}/nginx.conf`, "-e", `${prefix}/error.log`],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
  } finally {
    await Deno.remove(prefix, { recursive: true });
  }
});
