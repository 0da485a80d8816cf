// A local stand-in for the Hugging Face Hub, for the download tests (loopback only). It speaks
// the subset Flare uses: the revision and tree APIs (tree pages linked by `Link: rel="next"`;
// `?recursive=true` lists the files of every folder by their repository paths),
// `HEAD`/`GET /{repo}/resolve/{rev}/{file}` (small files served directly with their git blob id
// as ETag; large and .safetensors files answered with a 302 to a second "CDN" port, carrying
// X-Linked-Etag, X-Linked-Size and X-Repo-Commit), Range and 206 on both ports, and the Hub's
// errors with X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo).
//
//   node hub_server.mjs STATE_JSON LOG_FILE PORT_FILE
//
// STATE_JSON is read again on every request, so a test changes repositories and faults by
// rewriting it:
//   { "repos": { "org/name": { "refs": {"main": COMMIT}, "commits": {COMMIT: DIR},
//                              "gated": false, "private": false, "tokens": ["..."] } },
//     "page_size": 3,
//     "faults": { "rate_bytes_per_s": 0,       CDN bodies throttled to this rate
//                 "ignore_range": false,       the CDN answers 200 to Range requests
//                 "drop_after_bytes": 0, "drop_count": 0,   the first drop_count CDN bodies end
//                                              (connection destroyed) after that many bytes
//                 "corrupt": ["file"],         one byte of these files' bodies is flipped
//                 "status": {"code": 429, "count": 2, "retry_after": "1", "match": "/revision/"},
//                 "expire_cdn": 0,             the first N CDN requests get 403 (an expired URL)
//                 "inflate": {"file": N} } }   the tree lists that file with N bytes
// Fault counters restart whenever the file changes. Every request is appended to LOG_FILE as one
// JSON line: {port, method, path, range, auth}. PORT_FILE receives "API_PORT CDN_PORT".
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

const [statePath, logPath, portFile] = process.argv.slice(2);
const LFS_THRESHOLD = 1024;

let stateStamp = "";
let state = { repos: {}, faults: {} };
let counters = {};
function loadState() {
  const stat = fs.statSync(statePath);
  const stamp = `${stat.mtimeMs}:${stat.size}`;
  if (stamp !== stateStamp) {
    state = JSON.parse(fs.readFileSync(statePath, "utf8"));
    state.faults ??= {};
    stateStamp = stamp;
    counters = {};
  }
  return state;
}

// Content ids, computed once per file version.
const hashCache = new Map();
function fileInfo(file) {
  const stat = fs.statSync(file);
  const key = `${file}:${stat.size}:${stat.mtimeMs}`;
  let info = hashCache.get(key);
  if (!info) {
    const sha256 = crypto.createHash("sha256");
    const gitSha1 = crypto.createHash("sha1");
    gitSha1.update(`blob ${stat.size}\0`);
    const fd = fs.openSync(file, "r");
    const buffer = Buffer.alloc(8 << 20);
    for (;;) {
      const n = fs.readSync(fd, buffer, 0, buffer.length, null);
      if (n === 0) break;
      sha256.update(buffer.subarray(0, n));
      gitSha1.update(buffer.subarray(0, n));
    }
    fs.closeSync(fd);
    const name = path.basename(file);
    info = { file, size: stat.size, sha256: sha256.digest("hex"), oid: gitSha1.digest("hex"),
             lfs: stat.size > LFS_THRESHOLD || name.endsWith(".safetensors") };
    hashCache.set(key, info);
  }
  return info;
}

function log(port, req) {
  const line = JSON.stringify({ port, method: req.method, path: req.url, range: req.headers.range ?? null,
                                auth: req.headers.authorization ? true : false });
  fs.appendFileSync(logPath, line + "\n");
}

function sendError(res, status, code, message, extra = {}) {
  const body = JSON.stringify({ error: message });
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body),
                          "X-Error-Code": code, "X-Error-Message": message, "X-Request-Id": "test-request", ...extra });
  res.end(body);
}

// A configured status fault for this request, if one still applies.
function statusFault(res, url) {
  const fault = state.faults.status;
  if (!fault || (fault.match && !url.includes(fault.match))) return false;
  counters.status = (counters.status ?? 0) + 1;
  if (counters.status > (fault.count ?? 1)) return false;
  const headers = { "Content-Length": 0 };
  if (fault.retry_after !== undefined) headers["Retry-After"] = String(fault.retry_after);
  res.writeHead(fault.code, headers);
  res.end();
  return true;
}

// The repository, checked for access; null when an error was sent.
function repoFor(req, res, repoId) {
  const repo = state.repos[repoId];
  const token = (req.headers.authorization ?? "").replace(/^Bearer /, "");
  const allowed = token && (repo?.tokens ?? []).includes(token);
  if (!repo || (repo.private && !allowed)) {
    sendError(res, token ? 404 : 401, "RepoNotFound", "Repository not found");
    return null;
  }
  if (repo.gated && !allowed) {
    sendError(res, token ? 403 : 401, "GatedRepo",
              token ? "Access to this gated model is restricted: you are not in the authorized list"
                    : "You must be authenticated to access it");
    return null;
  }
  return repo;
}

function resolveRevision(repo, revision) {
  if (repo.commits[revision]) return revision;
  const commit = repo.refs?.[revision];
  return commit && repo.commits[commit] ? commit : null;
}

function topLevelEntries(dir) {
  return fs.readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isFile() || d.isDirectory())
    .map((d) => d.name).sort();
}

// Every entry under `dir` as a repository path (folders and files, depth first), for
// `?recursive=true` listings and CDN lookups of nested files.
function allEntries(dir, prefix = "") {
  const out = [];
  for (const name of topLevelEntries(path.join(dir, prefix))) {
    const rel = prefix ? `${prefix}/${name}` : name;
    out.push(rel);
    if (fs.statSync(path.join(dir, rel)).isDirectory()) out.push(...allEntries(dir, rel));
  }
  return out;
}

function treeEntry(dir, name) {
  const full = path.join(dir, name);
  if (fs.statSync(full).isDirectory()) return { type: "directory", oid: "0".repeat(40), path: name };
  const info = fileInfo(full);
  const size = state.faults.inflate?.[name] ?? info.size;
  const entry = { type: "file", oid: info.oid, size, path: name };
  if (info.lfs) entry.lfs = { oid: info.sha256, size, pointerSize: 134 };
  return entry;
}

function parseRange(header, size) {
  const match = /^bytes=(\d+)-(\d*)$/.exec(header ?? "");
  if (!match) return null;
  const first = Number(match[1]);
  const last = match[2] === "" ? size - 1 : Math.min(Number(match[2]), size - 1);
  if (first > last || first >= size) return { unsatisfiable: true };
  return { first, last };
}

// Sends a file (or a range of it) with the CDN's faults applied when `cdn` is set.
function sendFile(req, res, info, headers, cdn) {
  const faults = state.faults;
  let range = req.headers.range ? parseRange(req.headers.range, info.size) : null;
  if (cdn && faults.ignore_range) range = null;
  if (range?.unsatisfiable) {
    res.writeHead(416, { "Content-Range": `bytes */${info.size}`, "Content-Length": 0 });
    res.end();
    return;
  }
  const first = range ? range.first : 0;
  const last = range ? range.last : info.size - 1;
  const length = info.size === 0 ? 0 : last - first + 1;
  const out = { ...headers, "Content-Length": length, "Accept-Ranges": "bytes" };
  if (range) out["Content-Range"] = `bytes ${first}-${last}/${info.size}`;
  res.writeHead(range ? 206 : 200, out);
  if (req.method === "HEAD" || length === 0) {
    res.end();
    return;
  }
  let dropAfter = Infinity;
  if (cdn && faults.drop_after_bytes && (counters.drops ?? 0) < (faults.drop_count ?? 1)) {
    counters.drops = (counters.drops ?? 0) + 1;
    dropAfter = faults.drop_after_bytes;
  }
  const corruptAt = (faults.corrupt ?? []).includes(path.basename(info.file)) ? Math.floor(info.size / 2) : -1;
  const rate = cdn ? faults.rate_bytes_per_s ?? 0 : 0;
  const stream = fs.createReadStream(info.file, { start: first, end: last, highWaterMark: rate ? 16384 : 1 << 20 });
  let sent = 0;
  const started = Date.now();
  stream.on("data", (chunk) => {
    if (corruptAt >= first + sent && corruptAt < first + sent + chunk.length) {
      chunk = Buffer.from(chunk);
      chunk[corruptAt - first - sent] ^= 0xff;
    }
    if (sent + chunk.length > dropAfter) {
      // The bytes up to the drop reach the client, then the connection ends mid-body.
      stream.destroy();
      res.write(chunk.subarray(0, Math.max(0, dropAfter - sent)), () => res.socket?.destroy());
      return;
    }
    sent += chunk.length;
    const ok = res.write(chunk);
    const ahead = rate ? (sent / rate) * 1000 - (Date.now() - started) : 0;
    if (!ok || ahead > 0) {
      stream.pause();
      const resume = () => setTimeout(() => stream.resume(), Math.max(0, ahead));
      if (!ok) res.once("drain", resume); else resume();
    }
  });
  stream.on("end", () => res.end());
  stream.on("error", () => res.socket?.destroy());
  res.on("close", () => stream.destroy());
}

let apiPort = 0;
let cdnPort = 0;

function handleApi(req, res) {
  log("api", req);
  loadState();
  const url = new URL(req.url, "http://localhost");
  if (statusFault(res, url.pathname)) return;
  let m = /^\/api\/models\/([^/]+\/[^/]+)\/(revision|tree)\/([^/]+)$/.exec(url.pathname);
  if (m && req.method === "GET") {
    const repo = repoFor(req, res, m[1]);
    if (!repo) return;
    const revision = decodeURIComponent(m[3]);
    const commit = resolveRevision(repo, revision);
    if (!commit) return sendError(res, 404, "RevisionNotFound", `Invalid rev id: ${revision}`);
    const dir = repo.commits[commit];
    if (m[2] === "revision") {
      const body = JSON.stringify({ id: m[1], sha: commit, private: !!repo.private, gated: repo.gated ? "manual" : false,
                                    siblings: topLevelEntries(dir).map((name) => ({ rfilename: name })) });
      res.writeHead(200, { "Content-Type": "application/json" });
      return res.end(body);
    }
    const recursive = url.searchParams.get("recursive") === "true";
    const names = recursive ? allEntries(dir) : topLevelEntries(dir);
    const pageSize = state.page_size ?? 1000;
    const cursor = Number(url.searchParams.get("cursor") ?? 0);
    const page = names.slice(cursor, cursor + pageSize).map((name) => treeEntry(dir, name));
    const headers = { "Content-Type": "application/json" };
    if (cursor + pageSize < names.length)
      headers.Link = `<http://127.0.0.1:${apiPort}/api/models/${m[1]}/tree/${m[3]}?${recursive ? "recursive=true&" : ""}` +
                     `cursor=${cursor + pageSize}>; rel="next"`;
    res.writeHead(200, headers);
    return res.end(JSON.stringify(page));
  }
  m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(url.pathname);
  if (m && (req.method === "GET" || req.method === "HEAD")) {
    const repo = repoFor(req, res, m[1]);
    if (!repo) return;
    const revision = decodeURIComponent(m[2]);
    const commit = resolveRevision(repo, revision);
    if (!commit) return sendError(res, 404, "RevisionNotFound", `Invalid rev id: ${revision}`);
    const name = decodeURIComponent(m[3]);
    const full = path.join(repo.commits[commit], name);
    if (name.includes("..") || !fs.existsSync(full) || !fs.statSync(full).isFile())
      return sendError(res, 404, "EntryNotFound", `${name} does not exist`, { "X-Repo-Commit": commit });
    const info = fileInfo(full);
    if (info.lfs) {
      const body = "Found. Redirecting";
      res.writeHead(302, { Location: `http://127.0.0.1:${cdnPort}/cdn/${info.sha256}?X-Amz-Expires=3600`,
                           "X-Linked-Etag": `"${info.sha256}"`, "X-Linked-Size": info.size, "X-Repo-Commit": commit,
                           ETag: `W/"redirect-${info.oid}"`, "Content-Length": body.length });
      return res.end(req.method === "HEAD" ? undefined : body);
    }
    return sendFile(req, res, info, { ETag: `"${info.oid}"`, "X-Repo-Commit": commit }, false);
  }
  sendError(res, 404, "RepoNotFound", "Not found");
}

function handleCdn(req, res) {
  log("cdn", req);
  loadState();
  const url = new URL(req.url, "http://localhost");
  const m = /^\/cdn\/([0-9a-f]{64})$/.exec(url.pathname);
  if (!m) return sendError(res, 404, "", "Not found");
  if (state.faults.expire_cdn && (counters.expired ?? 0) < state.faults.expire_cdn) {
    counters.expired = (counters.expired ?? 0) + 1;
    return sendError(res, 403, "", "Request has expired");
  }
  for (const repo of Object.values(state.repos))
    for (const dir of Object.values(repo.commits))
      for (const name of allEntries(dir)) {
        const full = path.join(dir, name);
        if (!fs.statSync(full).isFile()) continue;
        const info = fileInfo(full);
        if (info.sha256 === m[1]) return sendFile(req, res, info, { ETag: `"${info.sha256}"` }, true);
      }
  sendError(res, 404, "", "No such object");
}

// A handler that throws answers 500 instead of ending the server.
const guarded = (handler) => (req, res) => {
  try {
    handler(req, res);
  } catch (error) {
    if (!res.headersSent) sendError(res, 500, "", String(error));
    else res.socket?.destroy();
  }
};
const api = http.createServer(guarded(handleApi));
const cdn = http.createServer(guarded(handleCdn));
api.listen(0, "127.0.0.1", () => {
  cdn.listen(0, "127.0.0.1", () => {
    apiPort = api.address().port;
    cdnPort = cdn.address().port;
    fs.writeFileSync(portFile + ".tmp", `${apiPort} ${cdnPort}\n`);
    fs.renameSync(portFile + ".tmp", portFile);
  });
});
