// HTTP/1.1 with keep-alive over node:http(s). call() sends one request and
// resolves to the decoded JSON answer (null for an empty body) or rejects
// with a TaskengineError. A call marked idempotent is retried with backoff
// after a transport error or a 429/502/503/504 answer. An AbortSignal ends a
// call early (a long poll at shutdown) with a TransportError "aborted".
import http from 'node:http';
import https from 'node:https';

import {TransportError, apiError} from './errors.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class Transport {
  constructor(baseUrl, {token = '', timeoutMs = 30000, retries = 2, backoffMs = 100,
                        userAgent = ''} = {}) {
    const url = new URL(baseUrl.replace(/\/+$/, ''));
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new TypeError(`server must be http(s)://host[:port], got ${baseUrl}`);
    }
    this.url = url;
    this.prefix = url.pathname === '/' ? '' : url.pathname;
    this.token = token;
    this.timeoutMs = timeoutMs;
    this.retries = retries;
    this.backoffMs = backoffMs;
    this.userAgent = userAgent;
    this.module = url.protocol === 'https:' ? https : http;
    // The server closes a keep-alive connection idle for 10 s.
    this.agent = new this.module.Agent({keepAlive: true, keepAliveMsecs: 1000, timeout: 5000,
                                        scheduling: 'lifo', maxFreeSockets: 16});
  }

  close() {
    this.agent.destroy();
  }

  async call(method, path, body = null, {headers = {}, timeoutMs = 0, idempotent = false,
                                         signal} = {}) {
    const attempts = 1 + (idempotent ? this.retries : 0);
    let delay = this.backoffMs;
    let resent = false;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once(method, path, body, headers, timeoutMs || this.timeoutMs, signal);
      } catch (e) {
        if (e.unsent && !resent) {
          resent = true;
          attempt--;
          continue;
        }
        if (attempt >= attempts || !e.retryable || signal?.aborted) throw e;
        const hint = e.httpStatus === 429 ? Math.min(e.retryAfter * 1000, 5000) : 0;
        await sleep(Math.max(delay, hint));
        delay *= 2;
      }
    }
  }

  once(method, path, body, extraHeaders, timeoutMs, signal) {
    const data = body === null || body === undefined ? null : JSON.stringify(body);
    const headers = {Accept: 'application/json', ...extraHeaders};
    if (data !== null) {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = Buffer.byteLength(data);
    }
    if (this.token) headers.Authorization = 'Bearer ' + this.token;
    if (this.userAgent) headers['User-Agent'] = this.userAgent;
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(new TransportError('aborted'));
        return;
      }
      const request = this.module.request({
        protocol: this.url.protocol, hostname: this.url.hostname, port: this.url.port,
        path: this.prefix + path, method, headers, agent: this.agent, signal,
      }, (response) => {
        const chunks = [];
        response.on('data', (c) => chunks.push(c));
        response.on('error', (e) => reject(new TransportError(`${method} ${path}: ${e.message}`)));
        response.on('end', () => {
          try {
            resolve(decode(response, Buffer.concat(chunks).toString('utf8')));
          } catch (e) {
            reject(e);
          }
        });
      });
      request.setTimeout(timeoutMs, () => {
        request.destroy(new Error(`timed out after ${timeoutMs} ms`));
      });
      request.on('error', (e) => {
        const message = signal?.aborted ? 'aborted' : `${method} ${path}: ${e.message}`;
        const error = new TransportError(message, {cause: e});
        // A kept-alive connection the server had closed: the request never arrived.
        error.unsent = request.reusedSocket && e.code === 'ECONNRESET' && !signal?.aborted;
        reject(error);
      });
      request.end(data ?? undefined);
    });
  }
}

function decode(response, text) {
  const status = response.statusCode;
  let doc = null;
  if (text) {
    try {
      doc = JSON.parse(text);
    } catch {
      throw apiError(status, status === 503 ? 'unavailable' : 'internal', text.slice(0, 200));
    }
  }
  if (status >= 200 && status < 300) {
    if (doc && typeof doc === 'object' && !('status_url' in doc) && response.headers.location) {
      doc.status_url = response.headers.location;
    }
    return doc;
  }
  const error = doc && typeof doc === 'object' && doc.error ? doc.error : {};
  const details = {...(error.details ?? {})};
  if (response.headers['retry-after'] && !('retry_after' in details)) {
    details.retry_after = response.headers['retry-after'];
  }
  const code = error.code || (status === 503 ? 'unavailable' : 'internal');
  throw apiError(status, code, error.message || `HTTP ${status}`, details);
}
