/**
 * nginx for the tests: the binary, and nginx started on loopback with the repository's routing and
 * locations (deploy/nginx/) in front of given hosts.
 *
 * @module
 */

const NGINX_DIR = new URL("../deploy/nginx/", import.meta.url).pathname;

/** The nginx binary: on PATH, or in the sbin folders a non-root PATH may lack. */
export function findNginx(): string {
  const path = (Deno.env.get("PATH") ?? "").split(":").concat(["/usr/sbin", "/usr/local/sbin", "/sbin"]);
  for (const dir of path) {
    try {
      if (Deno.statSync(`${dir}/nginx`).isFile) return `${dir}/nginx`;
    } catch { /* not here */ }
  }
  throw new Error(
    "nginx is not installed: the scale-out test needs it (Debian: apt-get install -y nginx-light; .ci/run does this)",
  );
}

/** A free TCP port on loopback (closed again before nginx binds it). */
function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  return port;
}

/** nginx with the repository's routing and locations in front of `hosts`, on a free port. */
export async function startNginx(
  hosts: { token: string; port: number }[],
): Promise<{ port: number } & AsyncDisposable> {
  const nginx = findNginx();
  const prefix = await Deno.makeTempDir({ prefix: "code-mode-nginx-" });
  await Deno.chmod(prefix, 0o755); // worker processes may run as another user
  for (const name of ["code-mode-routing.conf", "code-mode-locations.conf"]) {
    await Deno.copyFile(`${NGINX_DIR}${name}`, `${prefix}/${name}`);
  }
  const server = (h: { port: number }) => `    server 127.0.0.1:${h.port};\n`;
  await Deno.writeTextFile(
    `${prefix}/code-mode-hosts.conf`,
    `upstream code_mode_hosts {\n${hosts.map(server).join("")}    keepalive 64;\n}\n` +
      hosts.map((h) => `upstream route_${h.token} {\n${server(h)}    keepalive 64;\n}\n`).join(""),
  );
  for (let attempt = 1;; attempt++) {
    const port = freePort();
    await Deno.writeTextFile(
      `${prefix}/nginx.conf`,
      `worker_processes 1;
daemon off;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path ${prefix}/client_body;
    proxy_temp_path ${prefix}/proxy;
    fastcgi_temp_path ${prefix}/fastcgi;
    uwsgi_temp_path ${prefix}/uwsgi;
    scgi_temp_path ${prefix}/scgi;
    include code-mode-routing.conf;
    include code-mode-hosts.conf;
    server {
        listen 127.0.0.1:${port} http2;
        include code-mode-locations.conf;
    }
}
`,
    );
    const child = new Deno.Command(nginx, {
      args: ["-p", prefix, "-c", `${prefix}/nginx.conf`],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const stderr = new Response(child.stderr).text();
    // Ready once it accepts a connection; a failed start (e.g. the port was taken meanwhile) exits.
    const exited = child.status.then((status) => status);
    let ready = false;
    while (!ready) {
      const connected = await Deno.connect({ hostname: "127.0.0.1", port }).then(
        (c) => c.close(),
        () => false,
      );
      if (connected === undefined) ready = true;
      else if (await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(r, 20, false))])) {
        break;
      }
    }
    const dispose = async () => {
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      await child.status;
      await stderr;
    };
    if (ready) {
      return {
        port,
        async [Symbol.asyncDispose]() {
          await dispose();
          await Deno.remove(prefix, { recursive: true });
        },
      };
    }
    await dispose();
    const log = await Deno.readTextFile(`${prefix}/error.log`).catch(() => "");
    if (attempt === 3 || !log.includes("Address already in use")) {
      await Deno.remove(prefix, { recursive: true });
      throw new Error(`nginx did not start: ${await stderr}${log}`);
    }
  }
}
