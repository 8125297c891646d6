// MathJax 3 for pymdownx.arithmatex (generic mode: \( \) inline, \[ \] display, inside
// elements of class "arithmatex"); the script itself is served from the site (no CDN).
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex"
  }
};
// (navigation.instant is off in mkdocs.yml: every page loads MathJax afresh and typesets
// itself once, so no re-typesetting on Material's page swaps is needed)
