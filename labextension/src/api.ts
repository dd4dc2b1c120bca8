// The server extension's REST and websocket routes (jupyter_tiers/faces/server/API.md), through
// JupyterLab's ServerConnection: it adds the token and the XSRF header every mutation needs.

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { Item, ListAnswer, Verb } from './state';

/** The routes' prefix under the server's base URL. */
export const API = 'jupyter-tiers/api';

/** `jobs/{profile}/{id}`: both parts URL-encoded path segments. */
export function itemPath(profile: string, id: string): string {
  return `jobs/${encodeURIComponent(profile)}/${encodeURIComponent(id)}`;
}

/** A query string from the defined values, or "" (URLExt.objectToQueryString keeps undefined). */
export function query(params: Record<string, string | number | undefined>): string {
  const parts = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  return parts.length ? `?${parts.join('&')}` : '';
}

/** An error the server explained: its `{"error": ...}` sentence and HTTP status. */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
  }
}

/** The server's sentence from an error answer, else a sentence from the status line. */
export function errorMessage(status: number, statusText: string, body: string): string {
  try {
    const data = JSON.parse(body) as { error?: unknown; message?: unknown };
    if (typeof data.error === 'string' && data.error) {
      return data.error;
    }
    if (typeof data.message === 'string' && data.message) {
      return data.message;
    }
  } catch {
    // not JSON: a proxy's or tornado's page
  }
  if (status === 404 && !body.includes('error')) {
    return 'the jupyter-tiers server extension is not answering (is it enabled? `jupyter server extension list`)';
  }
  return `the server answered ${status} ${statusText}`.trim();
}

export class TiersApi {
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  async request<T>(path: string, init: RequestInit = {}): Promise<T> {
    const url = URLExt.join(this.settings.baseUrl, API, path);
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, init, this.settings);
    } catch (err) {
      throw new ApiError(`the Jupyter server cannot be reached: ${(err as Error).message}`, 0);
    }
    const body = await response.text();
    if (!response.ok) {
      throw new ApiError(errorMessage(response.status, response.statusText, body), response.status);
    }
    return (body ? JSON.parse(body) : {}) as T;
  }

  /** `GET jobs`: items, per-profile errors and the server revision the answer is as of. */
  list(refresh = true): Promise<ListAnswer> {
    return this.request(`jobs${refresh ? '' : query({ refresh: 0 })}`);
  }

  /** One item with its view state; `refresh = false` lets the server answer from its shared watch. */
  details(
    profile: string,
    id: string,
    refresh = true
  ): Promise<Item & { view: Record<string, unknown>; view_kind?: string }> {
    return this.request(detailsPath(profile, id, refresh));
  }

  async profiles(): Promise<ProfileList> {
    return parseProfiles(await this.request<unknown>('profiles'));
  }

  /** `jupyter tiers doctor NAME --json` through the server (parse it with doctor.ts). A POST:
   * the checks act (log in, write an object, run python), so the XSRF header must come along. */
  async doctor(profile: string): Promise<unknown> {
    return this.request<unknown>(`profiles/${encodeURIComponent(profile)}/doctor`, { method: 'POST' });
  }

  /** cancel (a job), scale / restart / promote / rollback / delete (a service): the server's
   * one-line answer. */
  async act(
    profile: string,
    id: string,
    verb: Verb,
    replicas?: number
  ): Promise<string> {
    const path = itemPath(profile, id);
    const answer = await this.request<{ ok?: boolean; message?: string }>(
      verb === 'delete' ? path : `${path}/${verb}`,
      {
        method: verb === 'delete' ? 'DELETE' : 'POST',
        body: verb === 'scale' ? JSON.stringify({ replicas }) : undefined
      }
    );
    return answer.message ?? `${verb}: done`;
  }

  /** A running job's stacks, grouped (`POST .../stacks`): the text `%tiers stacks` prints. */
  async stacks(profile: string, id: string): Promise<string> {
    const answer = await this.request<{ text?: string }>(`${itemPath(profile, id)}/stacks`, {
      method: 'POST'
    });
    return answer.text ?? '';
  }

  /** What a job left (`GET .../files`), as the server answers it. */
  files(profile: string, id: string): Promise<unknown> {
    return this.request(`${itemPath(profile, id)}/files`);
  }

  /** The URL of one listed file (an attachment the browser saves; the login cookie authenticates
   * the GET, so no token is put in the URL). */
  fileUrl(profile: string, id: string, name: string): string {
    return URLExt.join(this.settings.baseUrl, API, filePath(profile, id, name));
  }

  /** A websocket URL for a route (ws: or wss: like the page), with the token when there is one. */
  wsUrl(path: string, params: Record<string, string | number | undefined> = {}): string {
    const token = this.settings.token;
    const q = query({ ...params, token: token || undefined });
    return URLExt.join(this.settings.wsUrl, API, path) + q;
  }
}

/** `jobs/{profile}/{id}/files/{name}`: each part of the (relative) name its own encoded segment. */
export function filePath(profile: string, id: string, name: string): string {
  return `${itemPath(profile, id)}/files/${name.split('/').map(encodeURIComponent).join('/')}`;
}

/** `jobs/{profile}/{id}`, with `?refresh=0` when a cached answer will do (API.md). */
export function detailsPath(profile: string, id: string, refresh: boolean): string {
  return itemPath(profile, id) + (refresh ? '' : query({ refresh: 0 }));
}

export interface Profile {
  name: string;
  tier: string;
  /** The SSH host or Kubernetes context; null for a profile on this machine (the local tier). */
  host: string | null;
  /** Where it runs, for people: the host, "this machine", "kubeconfig context, namespace ...". */
  where: string;
  default: boolean;
}

export interface ProfileList {
  profiles: Profile[];
  default: string | null;
}

/** The `GET profiles` answer as typed values: entries without a name or tier are dropped, a
 * missing or non-text host is null (never the text "null"), `where` falls back to the host. */
export function parseProfiles(data: unknown): ProfileList {
  const raw = (data ?? {}) as { profiles?: unknown; default?: unknown };
  const profiles: Profile[] = [];
  for (const entry of Array.isArray(raw.profiles) ? raw.profiles : []) {
    const p = (entry ?? {}) as Record<string, unknown>;
    if (typeof p.name !== 'string' || !p.name || typeof p.tier !== 'string') {
      continue;
    }
    const host = typeof p.host === 'string' && p.host ? p.host : null;
    const where = typeof p.where === 'string' && p.where ? p.where : host ?? 'this machine';
    profiles.push({ name: p.name, tier: p.tier, host, where, default: p.default === true });
  }
  return { profiles, default: typeof raw.default === 'string' && raw.default ? raw.default : null };
}
