// The "Tiers" sidebar: every job and service of every profile, live over the `events` websocket.
// State lives in state.ts (pure); this file only draws it and turns clicks into API calls.
// Everything from the cluster is set with textContent, never as HTML.

import { Dialog, showDialog } from '@jupyterlab/apputils';
import { Signal, ISignal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { TiersApi } from './api';
import { HistoryRow } from './history';
import { HistoryView } from './historyView';
import { isOwn, markOwnRow } from './ownJob';
import { ServerClock, ageOf } from './rowAge';
import { ReconnectingSocket, connectionText } from './socket';
import {
  ACTIVE,
  EMPTY,
  Filters,
  Item,
  NO_FILTERS,
  State,
  Verb,
  actionsOf,
  facet,
  mergeList,
  meaningfulChanges,
  parseEvent,
  parseReplicas,
  reduce,
  rowSignature,
  stateClass,
  uploadText,
  visibleItems
} from './state';

function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  cls = '',
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (cls) {
    node.className = cls;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

const VERB_LABEL: Record<Verb, string> = {
  cancel: 'Cancel',
  scale: 'Scale',
  restart: 'Restart',
  promote: 'Promote',
  rollback: 'Roll back',
  delete: 'Delete',
  forget: 'Forget'
};

export class TiersSidebar extends Widget {
  constructor(
    private readonly api: TiersApi,
    private readonly openItem: (item: Item) => void,
    openHistoryJob: (profile: string, row: HistoryRow) => void = () => undefined
  ) {
    super();
    this.id = 'jupyter-tiers-sidebar';
    this.addClass('jt-side');
    this.title.caption = 'Tiers: jobs and services';

    const head = h('div', 'jt-side-head');
    head.append(h('span', 'jt-side-title', 'Tiers'), this._statusNode);
    const refresh = h('button', 'jt-side-refresh jp-Button', 'Refresh');
    refresh.title = 'Ask every cluster again';
    refresh.addEventListener('click', () => void this.refresh());
    head.append(refresh);

    const filters = h('div', 'jt-side-filters');
    this._search.type = 'search';
    this._search.placeholder = 'Search id, name, node, reason…';
    this._search.setAttribute('aria-label', 'Search jobs and services');
    this._search.addEventListener('input', () => this._setFilter('search', this._search.value));
    filters.append(this._search);
    for (const [field, select] of Object.entries(this._selects) as Array<
      [keyof typeof this._selects, HTMLSelectElement]
    >) {
      select.className = `jt-side-filter jt-side-filter-${field}`;
      select.setAttribute('aria-label', `Filter by ${field}`);
      select.title = `Show one ${field} only`;
      select.addEventListener('change', () => this._setFilter(field, select.value));
      filters.append(select);
    }

    // Two views: the live jobs and services, and Slurm accounting's history (a tab each).
    const tabs = h('div', 'jt-side-tabs');
    tabs.setAttribute('role', 'tablist');
    for (const [tab, label] of [['jobs', 'Jobs'], ['history', 'History']] as const) {
      const button = h('button', 'jt-side-tab', label);
      button.dataset.tab = tab;
      button.setAttribute('role', 'tab');
      button.setAttribute('aria-selected', String(tab === 'jobs'));
      button.addEventListener('click', () => this.showTab(tab));
      tabs.append(button);
    }
    this._history = new HistoryView(
      api,
      target => (target.kind === 'item' ? this.openItem(target.item) : openHistoryJob(target.profile, target.row)),
      () => this._state.items
    );

    this._list.setAttribute('role', 'list');
    this.node.append(head, tabs, filters, this._notice, this._errors, this._list, this._empty, this._history.node);
    this._render();
  }

  /** The current state (read-only; for the detail panels and tests). */
  get state(): State {
    return this._state;
  }

  /** Fires with the keys that an update or removal changed. */
  get changed(): ISignal<this, string[]> {
    return this._changed;
  }

  /** Shows the live list (`jobs`) or the accounting history (`history`, loaded when first shown). */
  showTab(tab: 'jobs' | 'history'): void {
    this.node.classList.toggle('jt-side-mode-history', tab === 'history');
    for (const button of this.node.querySelectorAll<HTMLElement>('.jt-side-tab')) {
      button.setAttribute('aria-selected', String(button.dataset.tab === tab));
    }
    if (tab === 'history') {
      this._history.show();
    }
  }

  /** Connects the `events` websocket (once); its first message is the snapshot. */
  start(): void {
    if (this._socket) {
      return;
    }
    this._socket = new ReconnectingSocket({
      url: () => this.api.wsUrl('events'),
      onMessage: text => this._onEvent(text),
      onStatus: (connected, attempt, nextMs) => {
        this._link = {
          connected,
          attempt,
          retryAt: Date.now() + nextMs,
          connections: this._link.connections + (connected ? 1 : 0)
        };
        this._renderStatus();
      }
    });
    this._ticker = window.setInterval(() => this._tick(), 1000);
  }

  /** Asks every cluster now (`GET jobs`; on the History tab, its accounting too); errors are shown
   * in the panel as text. */
  async refresh(): Promise<void> {
    if (this.node.classList.contains('jt-side-mode-history')) {
      void this._history.reload(); // the view on screen is asked again too
    }
    this._say('refreshing…');
    try {
      const answer = await this.api.list(true);
      const before = this._state;
      // Merged, not replaced: the websocket may have brought newer changes meanwhile.
      this._state = mergeList(before, answer, performance.now());
      const keys = new Set([...before.items.keys(), ...this._state.items.keys()]);
      this._changed.emit(meaningfulChanges(before, this._state, keys));
      this._say('');
    } catch (err) {
      this._say((err as Error).message, true);
    }
    if (this._socket && !this._socket.connected) {
      this._socket.reconnect();
    }
    this._render();
  }

  /** Asks for confirmation, then performs one action of a row. */
  async act(item: Item, verb: Verb): Promise<void> {
    const what = item.kind === 'job' ? `job ${item.id}` : `service ${item.name || item.id}`;
    const where = `on ${item.profile}`;
    let replicas: number | undefined;
    if (verb === 'scale') {
      const input = h('input', 'jt-side-replicas');
      input.type = 'number';
      input.min = '0';
      input.max = '1000';
      input.value = /^(\d+)\//.exec(item.size)?.[1] ?? '1';
      const body = new Widget();
      body.node.append(h('label', '', `Replicas of ${what} ${where}: `), input);
      const result = await showDialog({
        title: `Scale ${what}`,
        body,
        buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Scale' })],
        focusNodeSelector: 'input'
      });
      if (!result.button.accept) {
        return;
      }
      try {
        replicas = parseReplicas(input.value);
      } catch (err) {
        this._say((err as Error).message, true);
        return;
      }
    } else {
      const question = {
        cancel: `Cancel ${what} ${where}? Its ranks will be stopped.`,
        restart: `Restart every pod of ${what} ${where}?`,
        promote: `Promote the canary of ${what} ${where}? Every replica rolls to its revision.`,
        rollback: `Roll back the canary of ${what} ${where}? The stable revision takes its replicas back.`,
        delete: `Delete ${what} ${where}? Its Deployment and Service are removed.`,
        forget: `Forget ${what}? Its profile ${item.profile} no longer exists, so nothing can check it; it leaves this list (the cluster is not asked).`
      }[verb];
      // The buttons say what they do: a "Cancel" that cancels the job read as "dismiss".
      const [keep, go] = {
        cancel: ['Keep running', 'Cancel job'],
        restart: ['Keep', 'Restart'],
        promote: ['Keep the canary', 'Promote'],
        rollback: ['Keep the canary', 'Roll back'],
        delete: ['Keep', 'Delete service'],
        forget: ['Keep', 'Forget']
      }[verb];
      const result = await showDialog({
        title: `${VERB_LABEL[verb]} ${what}`,
        body: question,
        buttons: [Dialog.cancelButton({ label: keep }), Dialog.warnButton({ label: go })]
      });
      if (!result.button.accept) {
        return;
      }
    }
    this._say(`${verb}: ${what}…`);
    try {
      this._say(await this.api.act(item.profile, item.id, verb, replicas));
    } catch (err) {
      this._say(`${VERB_LABEL[verb]} ${what} failed: ${(err as Error).message}`, true);
    }
  }

  /** Connects when first shown: a JupyterLab whose sidebar stays closed opens no websocket (and
   * so makes the server's shared watcher poll nothing on its account). */
  protected onAfterShow(): void {
    this.start();
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    this._socket?.close();
    window.clearInterval(this._ticker);
    Signal.clearData(this);
    super.dispose();
  }

  private _onEvent(text: string): void {
    const msg = parseEvent(text);
    if (!msg) {
      return;
    }
    const before = this._state;
    if (msg.type === 'snapshot') {
      this._clock.set(msg.serverTime, performance.now()); // the first one sets it, once
    }
    this._state = reduce(before, msg, performance.now());
    const keys =
      msg.type === 'update'
        ? msg.items.map(i => i.key)
        : msg.type === 'removed'
          ? msg.keys
          : [...before.items.keys(), ...this._state.items.keys()];
    const changed = meaningfulChanges(before, this._state, new Set(keys));
    if (changed.length) {
      this._changed.emit(changed);
    }
    this._render();
  }

  private _say(text: string, isError = false): void {
    this._notice.textContent = text;
    this._notice.classList.toggle('jt-side-error', isError);
  }

  private _setFilter(field: keyof Filters, value: string): void {
    this._filters = { ...this._filters, [field]: value };
    this._render();
  }

  private _renderSelect(field: 'tier' | 'state' | 'profile'): void {
    const select = this._selects[field];
    const values = facet(this._state, field);
    const options = field === 'state' ? [ACTIVE, ...values] : values;
    const current = this._filters[field];
    if (current && !options.includes(current)) {
      options.push(current); // keep the user's choice visible even when nothing matches it now
    }
    const labels = ['', ...options];
    const have = [...select.options].map(o => o.value);
    if (have.join('\n') === labels.join('\n')) {
      return;
    }
    select.replaceChildren(
      ...labels.map(value => {
        const option = h('option', '', value || field);
        option.value = value;
        return option;
      })
    );
    select.value = current;
  }

  private _render(): void {
    for (const field of ['tier', 'state', 'profile'] as const) {
      this._renderSelect(field);
    }
    this._errors.replaceChildren(
      ...[...this._state.errors].map(([profile, message]) =>
        h('div', 'jt-side-error', `${profile || 'tiers'}: ${message}`)
      )
    );
    const rows = visibleItems(this._state, this._filters);
    const keep = new Map<string, HTMLElement>();
    for (const item of rows) {
      keep.set(item.key, this._row(item));
    }
    for (const [key, node] of this._rows) {
      if (!keep.has(key)) {
        node.remove();
      }
    }
    this._rows = keep;
    // Re-append in order only when the order changed (keeps focus and hover where they are).
    const order = [...this._list.children];
    const want = [...keep.values()];
    if (order.length !== want.length || want.some((n, i) => order[i] !== n)) {
      this._list.append(...want);
    }
    const total = this._state.items.size;
    this._empty.textContent = !this._state.loaded
      ? 'Loading…'
      : total === 0
        ? 'No jobs or services yet. Submit one with %%slurm_train or %%k8s_serve.'
        : rows.length === 0
          ? `None of the ${total} jobs and services match.`
          : '';
    this._tick();
  }

  /** The row of one item: reused when it exists, and drawn again only when what it shows changed
   * (an update per poll must not replace the buttons under the user's mouse: a click whose press
   * and release land on two different nodes is lost). */
  private _row(item: Item): HTMLElement {
    let node = this._rows.get(item.key);
    const signature = rowSignature(item);
    if (node && this._drawn.get(node) === signature) {
      return node;
    }
    if (!node) {
      node = h('div', 'jt-side-row');
      node.setAttribute('role', 'listitem');
      node.tabIndex = 0;
      node.dataset.key = item.key;
      const open = (ev: Event): void => {
        if ((ev.target as HTMLElement).closest('button')) {
          return;
        }
        const current = this._state.items.get(node!.dataset.key ?? '');
        if (current && !isOwn(current)) {
          this.openItem(current);
        }
      };
      node.addEventListener('click', open);
      node.addEventListener('keydown', ev => {
        if (ev.key === 'Enter') {
          open(ev);
        }
      });
    }
    node.dataset.state = item.state;
    node.dataset.kind = item.kind;
    node.title = item.summary || `${item.kind} ${item.id} on ${item.profile}`;
    const line1 = h('div', 'jt-side-line');
    const badge = h('span', 'jt-side-badge', item.state);
    badge.dataset.class = stateClass(item.state);
    const label = item.kind === 'job' ? `${item.id} · ${item.name}` : item.name || item.id;
    const name = h('span', 'jt-side-name', label);
    name.title = label; // the full name when the column cuts it
    line1.append(badge, name);
    markOwnRow(node, line1, item);
    const elapsed = h('span', 'jt-side-elapsed');
    line1.append(elapsed);
    const line2 = h('div', 'jt-side-line jt-side-meta');
    const where = h('span', 'jt-side-where', item.where);
    where.title = item.where;
    line2.append(h('span', 'jt-side-profile', item.profile), h('span', 'jt-side-size', item.size), where);
    const parts: HTMLElement[] = [line1, line2];
    if (item.reason) {
      const reason = h('div', 'jt-side-reason', item.reason);
      reason.title = item.reason;
      parts.push(reason);
    }
    const upload = uploadText(item.upload);
    if (upload) {
      const node = h('div', 'jt-side-upload', upload);
      node.dataset.state = item.upload?.state ?? '';
      parts.push(node);
    }
    const verbs = actionsOf(item);
    if (verbs.length) {
      const actions = h('div', 'jt-side-actions');
      for (const verb of verbs) {
        const btn = h('button', `jt-side-${verb} jp-Button`, VERB_LABEL[verb]);
        btn.addEventListener('click', () => void this.act(this._state.items.get(item.key) ?? item, verb));
        actions.append(btn);
      }
      parts.push(actions);
    }
    node.replaceChildren(...parts);
    this._drawn.set(node, signature);
    return node;
  }

  /** The connection status in the head (its countdown ticks); `data-connections` counts the
   * websocket's successful connections since the page loaded (each reconnect adds one). */
  private _renderStatus(now = Date.now()): void {
    const link = this._link;
    this._statusNode.textContent = connectionText(
      link.connected,
      link.attempt,
      link.connections > 0,
      link.retryAt - now
    );
    this._statusNode.dataset.connected = link.connected ? '1' : '';
    this._statusNode.title = this._statusNode.textContent ?? '';
    this._statusNode.dataset.connections = String(link.connections);
  }

  /** Updates the age column (every state ticks until it is final: rowAge.ts) and the reconnect
   * countdown locally, once a second, with no request. */
  private _tick(): void {
    // The page's monotonic clock (as when each elapsed_s arrived): a stepped wall clock must not
    // tick the elapsed column by an hour.
    const now = performance.now();
    // The server's wall clock (set once from the first snapshot): a waiting job's time in the queue
    // counts from its submission date, a row's age from when the server measured it.
    const wall = this._clock.now(now, Date.now());
    if (!this._link.connected && this._socket) {
      this._renderStatus(); // its countdown is on the wall clock, as the socket's retryAt
    }
    for (const [key, node] of this._rows) {
      const item = this._state.items.get(key);
      const span = node.querySelector<HTMLElement>('.jt-side-elapsed');
      if (item && span) {
        const age = ageOf(item, this._state.receivedAt.get(key), now, wall);
        span.textContent = age.text;
        span.title = age.title;
        span.dataset.age = age.kind;
      }
    }
  }

  private _state: State = EMPTY;
  private _history: HistoryView;
  private _filters: Filters = NO_FILTERS;
  private _socket: ReconnectingSocket | null = null;
  private _link = { connected: false, attempt: 0, retryAt: 0, connections: 0 };
  private _ticker = 0;
  private _clock = new ServerClock();
  private _rows = new Map<string, HTMLElement>();
  private _drawn = new WeakMap<HTMLElement, string>();
  private _changed = new Signal<this, string[]>(this);
  private _statusNode = h('span', 'jt-side-status');
  private _notice = h('div', 'jt-side-notice');
  private _errors = h('div', 'jt-side-errors');
  private _list = h('div', 'jt-side-list');
  private _empty = h('div', 'jt-side-empty');
  private _search = h('input', 'jt-side-search');
  private _selects = {
    tier: h('select'),
    state: h('select'),
    profile: h('select')
  };
}
