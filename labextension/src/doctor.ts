// "Check" per profile: `POST profiles/{name}/doctor` (jupyter tiers doctor NAME --json) shown as
// one line per check, OK / WARN / FAIL / SKIP, each fix under its line. Cluster text as
// textContent, never HTML.

import { Widget } from '@lumino/widgets';

import { Profile, TiersApi } from './api';
import { doctorLines, parseDoctor } from './doctorReport';

/** A panel listing the profiles, each with a Check button and its last report. */
export class DoctorPanel extends Widget {
  constructor(private readonly api: TiersApi) {
    super();
    this.id = 'jupyter-tiers-doctor';
    this.addClass('jt-doctor');
    this.title.label = 'Tiers: Check Profiles';
    this.title.closable = true;
    this._error.className = 'jt-detail-error';
    this._list.className = 'jt-doctor-list';
    this.node.append(this._error, this._list);
    void this.reload();
  }

  /** Lists the profiles again (their reports go). */
  async reload(): Promise<void> {
    this._error.textContent = '';
    let profiles: Profile[];
    try {
      profiles = (await this.api.profiles()).profiles;
    } catch (err) {
      this._error.textContent = (err as Error).message;
      return;
    }
    this._list.replaceChildren(...profiles.map(p => this._row(p)));
  }

  private _row(profile: Profile): HTMLElement {
    const row = document.createElement('div');
    row.className = 'jt-doctor-profile';
    row.dataset.profile = profile.name;
    const head = document.createElement('div');
    head.className = 'jt-doctor-head';
    const name = document.createElement('b');
    name.textContent = profile.name;
    const where = document.createElement('span');
    where.textContent = ` ${profile.tier} · ${profile.where} `;
    const button = document.createElement('button');
    button.className = 'jp-Button jt-doctor-check';
    button.textContent = 'Check';
    const result = document.createElement('pre');
    result.className = 'jt-doctor-result';
    button.onclick = async () => {
      button.disabled = true;
      result.dataset.state = 'running';
      result.textContent = 'checking… (a login and one command on the cluster)';
      try {
        const report = parseDoctor(await this.api.doctor(profile.name));
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
      } catch (err) {
        result.textContent = (err as Error).message;
        result.dataset.state = 'error';
      } finally {
        button.disabled = false;
      }
    };
    head.append(name, where, button);
    row.append(head, result);
    return row;
  }

  private readonly _error = document.createElement('div');
  private readonly _list = document.createElement('div');
}
