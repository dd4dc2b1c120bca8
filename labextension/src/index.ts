// jupyter-tiers for JupyterLab 4 and Notebook 7: the "Tiers" sidebar, its detail panels, and the
// commands "Tiers: Insert %%slurm_train cell", "Tiers: Insert %%k8s_serve cell", "Tiers: Refresh".

import {
  ILayoutRestorer,
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette, MainAreaWidget, showErrorMessage } from '@jupyterlab/apputils';
import { ILauncher } from '@jupyterlab/launcher';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { LabIcon } from '@jupyterlab/ui-components';

import { TiersApi } from './api';
import { TiersDetail } from './detail';
import { DoctorPanel } from './doctor';
import { HistoryRow } from './history';
import { HistoryDetail } from './historyDetail';
import { IPanelKind, showPanel } from './panels';
import { TiersSidebar } from './sidebar';
import { Item } from './state';
import { CellKind, cellTemplate, pickProfile } from './templates';

// Stacked layers (training below, serving above); jp-icon3 lets the theme choose the colour.
const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24">
<g class="jp-icon3" fill="#616161"><path d="M12 2 2 7l10 5 10-5-10-5z"/><path d="m2 12 10 5 10-5-2-1-8 4-8-4-2 1z"/>
<path d="m2 17 10 5 10-5-2-1-8 4-8-4-2 1z"/></g></svg>`;

export const tiersIcon = new LabIcon({ name: 'jupyter-tiers:tiers', svgstr: ICON_SVG });

const CMD = {
  open: 'jupyter-tiers:open',
  refresh: 'jupyter-tiers:refresh',
  slurm: 'jupyter-tiers:insert-slurm-train',
  k8s: 'jupyter-tiers:insert-k8s-serve',
  doctor: 'jupyter-tiers:doctor'
};

const DETAIL_PANEL: IPanelKind<TiersDetail> = {
  className: 'jt-detail-panel',
  refreshClassName: 'jt-detail-refresh',
  // The panel re-reads from the server's shared watch; this asks the cluster itself.
  refreshTooltip: 'Ask the cluster for this item now',
  refresh: content => void content.reload(true)
};

const HISTORY_PANEL: IPanelKind<HistoryDetail> = {
  className: 'jt-hist-detail-panel',
  refreshClassName: 'jt-hist-detail-refresh',
  refreshTooltip: 'Read its accounting row and output again',
  refresh: content => void content.reload()
};

const DOCTOR_PANEL: IPanelKind<DoctorPanel> = {
  className: 'jt-doctor-panel',
  refreshClassName: 'jt-doctor-refresh',
  refreshTooltip: 'List the profiles again',
  refresh: content => void content.reload()
};

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-tiers:plugin',
  description: 'The Tiers sidebar: Slurm jobs and Kubernetes services, live.',
  autoStart: true,
  optional: [ICommandPalette, ILauncher, INotebookTracker, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    launcher: ILauncher | null,
    notebooks: INotebookTracker | null,
    restorer: ILayoutRestorer | null
  ) => {
    const api = new TiersApi(app.serviceManager.serverSettings);
    const details = new Map<string, MainAreaWidget<TiersDetail>>();

    const open = (item: Item): void =>
      showPanel(app, details, item.key, tiersIcon, DETAIL_PANEL, () =>
        new TiersDetail(api, item, open)
      );

    // A History row of a job jupyter-tiers did not submit: a read-only panel (its row, its output).
    const readonly = new Map<string, MainAreaWidget<HistoryDetail>>();
    const openHistoryJob = (profile: string, row: HistoryRow): void =>
      showPanel(app, readonly, `${profile}/${row.job_id}`, tiersIcon, HISTORY_PANEL, () =>
        new HistoryDetail(api, profile, row)
      );

    const sidebar = new TiersSidebar(api, open, openHistoryJob);
    sidebar.title.icon = tiersIcon;
    sidebar.changed.connect((_, keys) => {
      for (const key of keys) {
        void details.get(key)?.content.reload();
        // An array's tasks have panels of their own but no rows: they change with the array.
        for (const [other, panel] of details) {
          if (other.startsWith(`${key}_`)) {
            void panel.content.reload();
          }
        }
      }
    });
    app.shell.add(sidebar, 'left', { rank: 600 });
    restorer?.add(sidebar, sidebar.id);

    app.commands.addCommand(CMD.open, {
      label: 'Tiers: Show Sidebar',
      execute: () => app.shell.activateById(sidebar.id)
    });
    app.commands.addCommand(CMD.refresh, {
      label: 'Tiers: Refresh',
      caption: 'Ask every cluster for the state of every job and service',
      icon: args => (args.isLauncher ? tiersIcon : undefined),
      execute: async () => {
        await sidebar.refresh();
        for (const panel of details.values()) {
          void panel.content.reload(true);
        }
      }
    });

    const insert = async (kind: CellKind, fromLauncher: boolean): Promise<void> => {
      let profiles;
      try {
        profiles = await api.profiles();
      } catch (err) {
        await showErrorMessage('Tiers: no profiles', (err as Error).message);
        return;
      }
      const profile = pickProfile(profiles.profiles, profiles.default, kind);
      const text = cellTemplate(kind, profile);
      let panel: NotebookPanel | null = fromLauncher ? null : notebooks?.currentWidget ?? null;
      if (!panel) {
        panel = (await app.commands.execute('notebook:create-new', {
          kernelName: 'python3'
        })) as NotebookPanel;
        await panel.context.ready;
        panel.content.activeCell?.model.sharedModel.setSource('%load_ext jupyter_tiers');
      }
      NotebookActions.insertBelow(panel.content);
      panel.content.activeCell?.model.sharedModel.setSource(text);
      app.shell.activateById(panel.id);
    };
    app.commands.addCommand(CMD.slurm, {
      label: 'Tiers: Insert %%slurm_train cell',
      caption: 'A training cell for the default Slurm (or local) profile',
      icon: args => (args.isLauncher ? tiersIcon : undefined),
      execute: args => insert('slurm_train', Boolean(args.isLauncher))
    });
    app.commands.addCommand(CMD.k8s, {
      label: 'Tiers: Insert %%k8s_serve cell',
      caption: 'A serving cell for the default Kubernetes profile',
      icon: args => (args.isLauncher ? tiersIcon : undefined),
      execute: args => insert('k8s_serve', Boolean(args.isLauncher))
    });

    const doctors = new Map<string, MainAreaWidget<DoctorPanel>>();
    app.commands.addCommand(CMD.doctor, {
      label: 'Tiers: Check Profiles (doctor)',
      caption: 'Check each profile: reach, host key, login, scheduler or cluster access, workdir, Python',
      execute: () => showPanel(app, doctors, 'doctor', tiersIcon, DOCTOR_PANEL, () => new DoctorPanel(api))
    });

    // The sidebar's Check: the panel with a Check button per profile.
    const check = document.createElement('button');
    check.className = 'jt-side-doctor jp-Button';
    check.textContent = 'Check';
    check.title = 'Check the profiles: reach, login, access, workdir, Python (jupyter tiers doctor)';
    check.addEventListener('click', () => void app.commands.execute(CMD.doctor));
    sidebar.node.querySelector('.jt-side-head')?.append(check);

    for (const command of [CMD.slurm, CMD.k8s, CMD.refresh, CMD.open, CMD.doctor]) {
      palette?.addItem({ command, category: 'Tiers' });
    }
    [CMD.slurm, CMD.k8s, CMD.refresh].forEach((command, rank) =>
      launcher?.add({ command, category: 'Tiers', rank, args: { isLauncher: true } })
    );
  }
};

export default plugin;
