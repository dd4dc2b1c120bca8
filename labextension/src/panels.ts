// The main-area panels the sidebar opens: one per key, created on first open, shown again after,
// forgotten when closed; each with a Refresh button in its toolbar.

import { JupyterFrontEnd } from '@jupyterlab/application';
import { MainAreaWidget } from '@jupyterlab/apputils';
import { LabIcon, ToolbarButton, refreshIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

/** How a kind of panel looks and refreshes. */
export interface IPanelKind<T extends Widget> {
  /** The panel's class (its styles and the browser tests find it by it). */
  className: string;
  /** The Refresh button's class and tooltip. */
  refreshClassName: string;
  refreshTooltip: string;
  /** What Refresh does to the panel's content. */
  refresh: (content: T) => void;
}

/**
 * Show the panel of `key` in `panels`, first creating it (with `make`) if there is none or it was
 * closed. A new panel goes to the main area; Notebook 7 keeps one widget in its main area (the
 * tree or the notebook), so there it goes to the right side panel instead.
 */
export function showPanel<T extends Widget>(
  app: JupyterFrontEnd,
  panels: Map<string, MainAreaWidget<T>>,
  key: string,
  icon: LabIcon,
  kind: IPanelKind<T>,
  make: () => T
): void {
  let panel = panels.get(key);
  if (!panel || panel.isDisposed) {
    const content = make();
    const created = new MainAreaWidget({ content });
    // The panel takes the content's id (activateById finds it); the content gets its own, so
    // that no two elements of the page share one.
    created.id = content.id;
    content.id = panelContentId(content.id);
    created.title.icon = icon;
    created.addClass(kind.className);
    created.toolbar.addItem(
      'refresh',
      new ToolbarButton({
        icon: refreshIcon,
        label: 'Refresh',
        tooltip: kind.refreshTooltip,
        className: kind.refreshClassName,
        onClick: () => kind.refresh(content)
      })
    );
    panels.set(key, created);
    created.disposed.connect(() => panels.delete(key));
    app.shell.add(created, 'main');
    if (!created.isAttached) {
      app.shell.add(created, 'right', { rank: 600 });
    }
    panel = created;
  }
  app.shell.activateById(panel.id);
}

/** The id of a panel's content, given the panel's (unique in the page as the panel's is). */
export function panelContentId(panelId: string): string {
  return `${panelId}-content`;
}
