// "Check" per profile: `POST profiles/{name}/doctor` (jupyter tiers doctor NAME --json) shown as
// one line per check, OK / WARN / FAIL / SKIP, each fix under its line; "Check all" runs every
// profile's at once. Cluster text as textContent, never HTML.

import { Widget } from '@lumino/widgets';

import { Profile, TiersApi } from './api';
import { checkAllSummary, checkWords, doctorLines, parseDoctor } from './doctorReport';

type Outcome = 'ok' | 'failed' | 'error';

/** A panel listing the profiles, each with a Check button and its last report, and Check all. */
export class DoctorPanel extends Widget {
  constructor(private readonly api: TiersApi) {
    super();
    this.id = 'jupyter-tiers-doctor';
    this.addClass('jt-doctor');
    this.title.label = 'Tiers: Check Profiles';
    this.title.closable = true;
    this._error.className = 'jt-detail-error';
    this._list.className = 'jt-doctor-list';
    const bar = document.createElement('div');
    bar.className = 'jt-doctor-bar';
    this._all.className = 'jp-Button jt-doctor-button jt-doctor-all';
    this._all.textContent = 'Check all';
    this._all.title = 'Check every profile (each as its own Check does)';
    this._all.addEventListener('click', () => void this.checkAll());
    this._summary.className = 'jt-doctor-summary';
    bar.append(this._all, this._summary);
    this.node.append(bar, this._error, this._list);
    void this.reload();
  }

  /** Lists the profiles again (their reports go). */
  async reload(): Promise<void> {
    this._error.textContent = '';
    this._summary.textContent = '';
    let profiles: Profile[];
    try {
      profiles = (await this.api.profiles()).profiles;
    } catch (err) {
      this._error.textContent = (err as Error).message;
      return;
    }
    this._checks.clear();
    this._list.replaceChildren(...profiles.map(p => this._row(p)));
    this._all.disabled = profiles.length === 0;
  }

  /** Checks every listed profile at once (an unreachable one does not hold up the others), then
   * says how they went. */
  async checkAll(): Promise<void> {
    const checks = [...this._checks.values()];
    if (!checks.length) {
      return;
    }
    this._all.disabled = true;
    this._summary.textContent = `checking ${checks.length} profile${checks.length === 1 ? '' : 's'}…`;
    try {
      this._summary.textContent = checkAllSummary(await Promise.all(checks.map(check => check())));
    } finally {
      this._all.disabled = false;
    }
  }

  private _row(profile: Profile): HTMLElement {
    const row = document.createElement('div');
    row.className = 'jt-doctor-profile';
    row.dataset.profile = profile.name;
    row.dataset.tier = profile.tier;
    const head = document.createElement('div');
    head.className = 'jt-doctor-head';
    const name = document.createElement('b');
    name.textContent = profile.name;
    const where = document.createElement('span');
    where.className = 'jt-doctor-where';
    where.textContent = ` ${profile.tier} · ${profile.where} `;
    const words = checkWords(profile);
    const button = document.createElement('button');
    button.className = 'jp-Button jt-doctor-button jt-doctor-check';
    button.textContent = 'Check';
    button.title = words.title;
    const result = document.createElement('pre');
    result.className = 'jt-doctor-result';
    let running: Promise<Outcome> | null = null;
    const check = (): Promise<Outcome> => {
      running ??= this._check(profile.name, button, result, words.running).finally(() => {
        running = null;
      });
      return running;
    };
    button.addEventListener('click', () => void check());
    this._checks.set(profile.name, check);
    head.append(name, where, button);
    row.append(head, result);
    return row;
  }

  private async _check(name: string, button: HTMLButtonElement, result: HTMLElement, words: string): Promise<Outcome> {
    button.disabled = true;
    result.dataset.state = 'running';
    result.textContent = words;
    try {
      const report = parseDoctor(await this.api.doctor(name));
      result.replaceChildren(
        ...doctorLines(report).map(line => {
          const div = document.createElement('div');
          div.className = 'jt-doctor-line';
          div.dataset.status = line.status;
          div.textContent = line.text;
          return div;
        })
      );
      result.dataset.state = report.ok ? 'ok' : 'failed';
      return report.ok ? 'ok' : 'failed';
    } catch (err) {
      result.textContent = (err as Error).message;
      result.dataset.state = 'error';
      return 'error';
    } finally {
      button.disabled = false;
    }
  }

  private readonly _error = document.createElement('div');
  private readonly _list = document.createElement('div');
  private readonly _all = document.createElement('button');
  private readonly _summary = document.createElement('span');
  private readonly _checks = new Map<string, () => Promise<Outcome>>();
}
