// The types of the notebook widgets' view modules (jupyter_tiers/faces/widgets/*.js, plain ES modules
// the detail panel imports from there; webpack bundles them, tsc only checks against this).

/** What every view's render() gets: an anywidget-like model (the panel's ViewModel) and its node. */
type JtViewArgs = {
  model: import('./adapter').ViewModel;
  el: HTMLElement;
};

/** A view: render() draws into `el` and returns what stops its timers. */
type JtView = { render(args: JtViewArgs): (() => void) | void };

/** A part a view may have, made from the model and the box it draws into. */
type JtPart = (args: { model: JtViewArgs['model']; box: HTMLElement }) => { shown(): void };

declare module '*/widgets/job_view.js' {
  /** JobView with its optional parts (the notebook widget's default has both). */
  export function jobView(parts: { charts?: unknown; files?: JtPart | null }): JtView;
  const view: JtView;
  export default view;
}

declare module '*/widgets/serve_view.js' {
  /** ServeView with its optional panels (the notebook widget's default has both). */
  export function serveView(parts: { tryPanel?: unknown; loadPanel?: unknown }): JtView;
  const view: JtView;
  export default view;
}

declare module '*/widgets/array_view.js' {
  const view: JtView;
  export default view;
}

declare module '*/widgets/files_pane.js' {
  /** JobView's Files tab. */
  export const jtFilesPane: JtPart;
}

declare module '*/widgets/metrics_chart.js' {
  /** JobView's metric charts: made on a box, then called with the `metrics` series to draw. */
  export function metricsChart(container: HTMLElement): unknown;
}
