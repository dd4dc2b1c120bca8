// Helpers shared by the jupyter-tiers views. The Python side puts this file in front of each
// view's module (anywidget loads one ES module per widget), so JobView and ServeView draw text
// and durations the same way.

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

function fmt(seconds) {
  if (seconds < 0) return "--:--:--";
  const d = Math.floor(seconds / 86400);
  const hh = String(Math.floor((seconds % 86400) / 3600)).padStart(2, "0");
  const mm = String(Math.floor((seconds % 3600) / 60)).padStart(2, "0");
  const ss = String(Math.floor(seconds % 60)).padStart(2, "0");
  return (d ? d + "-" : "") + `${hh}:${mm}:${ss}`;
}
