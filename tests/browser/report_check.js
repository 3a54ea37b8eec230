// Checks a d500 report.html through its DOM in a real browser (tests/browser/check-report.sh
// appends this to a copy of the page and reads the verdict from the dumped DOM): every figure
// has a non-empty plotting area with something plotted in it, no title, axis label or legend
// entry is clipped by its figure or overlaps another, x tick labels do not overlap, no two ticks of
// an axis (nor two boxes' names, nor two legend entries) read alike, every line
// joins its points in x order, and every plotted point and box has hover text; with every folded
// box (<details>) opened.
(function () {
  var errors = [];
  // Detail folded into a closed box is checked as a reader sees it once opened.
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  function inside(b, box) { return b.left >= box.left - 0.5 && b.right <= box.right + 0.5 && b.top >= box.top - 0.5 && b.bottom <= box.bottom + 0.5; }
  function overlap(a, b) { return a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5; }
  var figures = document.querySelectorAll('svg.d500-figure');
  if (!figures.length) errors.push('no figure in the report');
  var points = 0;
  figures.forEach(function (svg, i) {
    var title = svg.querySelector('text.title');
    var name = (title ? title.textContent : 'figure ' + (i + 1)) + ' (figure ' + (i + 1) + ')';
    var frame = svg.getBoundingClientRect();
    var area = svg.querySelector('rect.plot-area');
    if (!area) { errors.push(name + ': no plotting area'); return; }
    var ab = area.getBoundingClientRect();
    if (ab.width < 50 || ab.height < 50) errors.push(name + ': plotting area ' + ab.width + 'x' + ab.height);
    var marks = svg.querySelectorAll('circle.point, g.box, rect.bar');
    var curves = svg.querySelectorAll('g.series polyline');  // a training curve: a time series without markers
    if (!marks.length && !curves.length) errors.push(name + ': nothing plotted');
    curves.forEach(function (c) {
      var t = c.querySelector('title');
      if (!t || !t.textContent.trim()) errors.push(name + ': a line without hover text');
    });
    marks.forEach(function (m) {
      points++;
      var t = m.querySelector('title');
      if (!t || !t.textContent.trim()) errors.push(name + ': a point without hover text');
      var b = m.getBoundingClientRect();
      if ((m.tagName === 'circle' || m.tagName === 'rect') && !inside(b, ab)) errors.push(name + ': a point outside the plotting area');
    });
    var labels = Array.prototype.slice.call(svg.querySelectorAll('text.title, text.xlabel, text.ylabel, text.legend'));
    labels.forEach(function (t) {
      if (!inside(t.getBoundingClientRect(), frame)) errors.push(name + ': clipped: "' + t.textContent + '"');
    });
    svg.querySelectorAll('text.tick').forEach(function (t) {
      if (!inside(t.getBoundingClientRect(), frame)) errors.push(name + ': tick label clipped: "' + t.textContent + '"');
    });
    for (var a = 0; a < labels.length; ++a)
      for (var b = a + 1; b < labels.length; ++b)
        if (overlap(labels[a].getBoundingClientRect(), labels[b].getBoundingClientRect()))
          errors.push(name + ': "' + labels[a].textContent + '" overlaps "' + labels[b].textContent + '"');
    var ticks = Array.prototype.slice.call(svg.querySelectorAll('text.tick')).filter(function (t) {
      return !t.getAttribute('transform') && t.getAttribute('text-anchor') === 'middle';
    });
    for (var c = 0; c + 1 < ticks.length; ++c)
      if (overlap(ticks[c].getBoundingClientRect(), ticks[c + 1].getBoundingClientRect()))
        errors.push(name + ': x tick labels "' + ticks[c].textContent + '" and "' + ticks[c + 1].textContent + '" overlap');
    // The names of categories and of a box plot's rows too (slanted, or right-aligned beside their
    // row): two that read alike are two points nobody can tell apart.
    var slanted = Array.prototype.slice.call(svg.querySelectorAll('text.tick')).filter(function (t) {
      return !!t.getAttribute('transform') || (t.getAttribute('text-anchor') === 'end' && !t.classList.contains('ytick'));
    });
    // What a label shows, less the full text of its <title> (hover only): a name cut to fit, or
    // a legend name on two lines (<tspan>s).
    var shown = function (t) {
      return Array.prototype.filter.call(t.childNodes, function (n) { return n.nodeType === 3 || n.nodeName === 'tspan'; })
        .map(function (n) { return n.textContent; }).join('');
    };
    // And the legend's entries: two series whose names read alike are two series nobody can tell apart.
    var legend = Array.prototype.slice.call(svg.querySelectorAll('text.legend'));
    [ticks, slanted, Array.prototype.slice.call(svg.querySelectorAll('text.ytick')), legend].forEach(function (axis) {
      var seen = {};
      axis.forEach(function (t) {
        if (seen[shown(t)]) errors.push(name + ': two ' + (axis === legend ? 'legend entries' : 'ticks of one axis') + ' read "' + shown(t) + '"');
        seen[shown(t)] = true;
      });
    });
    svg.querySelectorAll('g.series').forEach(function (g) {
      var line = g.querySelector('polyline');
      if (!line) return;
      var xs = line.getAttribute('points').trim().split(/\s+/).map(function (p) { return parseFloat(p.split(',')[0]); });
      for (var k = 1; k < xs.length; ++k)
        if (xs[k] < xs[k - 1]) { errors.push(name + ': series ' + g.getAttribute('data-name') + ' is not ordered along x'); break; }
      var dx = Array.prototype.map.call(g.querySelectorAll('circle.point'), function (p) { return parseFloat(p.getAttribute('data-x')); });
      for (var k2 = 1; k2 < dx.length; ++k2)
        if (dx[k2] <= dx[k2 - 1]) { errors.push(name + ': series ' + g.getAttribute('data-name') + ' joins two points at one x'); break; }
    });
  });
  var pre = document.createElement('pre');
  pre.id = 'd500-check';
  pre.textContent = 'D500-CHECK ' + (errors.length ? 'FAIL ' + errors.length + '\n' + errors.join('\n')
                                                    : 'ok: ' + figures.length + ' figures, ' + points + ' points and boxes');
  document.body.appendChild(pre);
})();
