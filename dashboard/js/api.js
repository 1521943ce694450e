// The one place that talks to /api/v1. Same-origin fetches with the session
// cookie; every mutation carries the session's CSRF token, read from
// GET /api/v1/auth/session just before it. Errors come back as ApiError with
// the API's {error: {code, message}}.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function send(method, path, body, headers = {}) {
  const init = {method, credentials: 'same-origin', headers: {Accept: 'application/json', ...headers}};
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'network', 'the server did not answer: ' + e.message);
  }
  if (response.status === 401) {
    // The session ended: log in again and come back here.
    location.assign('/login?next=' + encodeURIComponent(location.pathname + location.search));
    throw new ApiError(401, 'unauthenticated', 'your session ended');
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data && data.error ? data.error : {};
    throw new ApiError(response.status, error.code || 'http_' + response.status,
                       error.message || 'HTTP ' + response.status);
  }
  return {status: response.status, data};
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? '?' + s : '';
}

export async function get(path, params) {
  return (await send('GET', '/api/v1' + path + query(params))).data;
}

export async function session() {
  return get('/auth/session');
}

// A mutation: {status, data}. The CSRF token is fetched fresh each time.
export async function mutate(method, path, body) {
  const who = await session();
  return send(method, '/api/v1' + path, body, {'X-CSRF-Token': who.csrf_token || ''});
}

export async function logout() {
  await mutate('POST', '/auth/logout');
}
