// tracegrade UI: the little the server-rendered pages need from a script. Nothing here builds markup from
// data as HTML: values go in through textContent; only the server's own escaped row fragment is swapped in.
(function () {
  'use strict';

  function fail(where, response) {
    return response.json().then(function (body) { throw new Error(where + ': ' + (body.error || response.status)); },
      function () { throw new Error(where + ': HTTP ' + response.status); });
  }

  // The API sends integers exactly, nanosecond times and BIGINT/HUGEINT values beyond 2**53 too; a JavaScript
  // number would lose their last digits, so such an integer keeps its JSON text (JSON.rawJSON), which
  // JSON.stringify writes back as it came.
  function bigIntegers(key, value, context) {
    return typeof value === 'number' && !Number.isSafeInteger(value) && context && /^-?\d+$/.test(context.source) ?
      JSON.rawJSON(context.source) : value;
  }

  function getJSON(url, options) {
    return fetch(url, Object.assign({ credentials: 'same-origin' }, options || {})).then(function (r) {
      if (!r.ok) { return fail(url.split('?')[0], r); }
      return r.text().then(function (text) {
        return typeof JSON.rawJSON === 'function' ? JSON.parse(text, bigIntegers) : JSON.parse(text);
      });
    });
  }

  // Filters and run pickers apply with their form's button, or Enter on a select: arrow keys on a select
  // only move through its options (submitting on change would reload at the first arrow key).
  document.querySelectorAll('form.filters select').forEach(function (select) {
    select.addEventListener('keydown', function (event) {
      if (event.key === 'Enter') { event.preventDefault(); select.form.requestSubmit(); }
    });
  });

  // Traces: the newest page polls its own rows every 5 s while the tab is visible.
  var live = document.querySelector('[data-live]');
  var rows = document.getElementById('trace-rows');
  if (live && rows) {
    var seen = {};
    rows.querySelectorAll('tr[data-trace]').forEach(function (tr) { seen[tr.getAttribute('data-trace')] = true; });
    var refresh = function () {
      if (document.hidden) { return; }
      var params = new URLSearchParams(location.search);
      params.set('fragment', 'rows');
      fetch(location.pathname + '?' + params.toString(), { credentials: 'same-origin' }).then(function (r) {
        if (!r.ok) { throw new Error('HTTP ' + r.status); }
        return r.text();
      }).then(function (html) {
        rows.innerHTML = html;  // the server's escaped rendering of the same rows
        rows.querySelectorAll('tr[data-trace]').forEach(function (tr) {
          var id = tr.getAttribute('data-trace');
          if (!seen[id]) { tr.classList.add('fresh'); seen[id] = true; }
        });
        // "Older ›" continues from the last row shown now, not from the rows the page loaded with
        var last = rows.querySelector('tr[data-next]');
        document.querySelectorAll('a[data-older]').forEach(function (older) {
          if (last) {
            var query = new URLSearchParams(older.search);
            query.set('cursor', last.getAttribute('data-next'));
            older.search = query.toString();
          }
          older.hidden = !last;
        });
        live.textContent = 'live · updated ' + new Date().toLocaleTimeString();
      }).catch(function (err) { live.textContent = 'live updates paused: ' + err.message; });
    };
    setInterval(refresh, 5000);
  }

  // Trace: any step's "raw span" (and every waterfall row) opens the stored span and its logs.
  var panel = document.getElementById('raw-panel');
  if (panel) {
    var trace = panel.getAttribute('data-trace');
    var opener = null;  // the control that opened the panel: focus goes back to it when the panel closes
    var closePanel = function () {
      panel.hidden = true;
      if (opener) { opener.focus(); opener = null; }
    };
    document.addEventListener('keydown', function (event) {
      if (event.key === 'Escape' && !panel.hidden) { closePanel(); }
    });
    document.addEventListener('click', function (event) {
      var button = event.target.closest('[data-span]');
      if (button) {
        event.preventDefault();
        var span = button.getAttribute('data-span');
        opener = button;
        panel.hidden = false;
        panel.querySelector('[data-close]').focus();  // keyboard users land in the panel they opened
        document.getElementById('raw-span').textContent = 'loading span ' + span + '…';
        document.getElementById('raw-logs').textContent = '';
        getJSON('/ui/api/traces/' + encodeURIComponent(trace) + '/spans/' + encodeURIComponent(span))
          .then(function (data) {
            document.getElementById('raw-span').textContent = JSON.stringify(data.span, null, 2);
            document.getElementById('raw-logs').textContent = data.logs.length ?
              JSON.stringify(data.logs, null, 2) : 'no log records for this span';
          }).catch(function (err) { document.getElementById('raw-span').textContent = err.message; });
      }
      if (event.target.closest('[data-close]')) { closePanel(); }
    });
  }

  // SQL: run the box through the API and show the rows as a table.
  var sqlForm = document.getElementById('sql-form');
  var MAX_ADDRESS_QUERY = 2000;  // characters of an encoded query kept in the address (bookmarks, reload)
  if (sqlForm) {
    var box = document.getElementById('sql-text');
    var status = document.getElementById('sql-status');
    var out = document.getElementById('sql-result');
    var cell = function (tag, value) {
      var el = document.createElement(tag);
      var text = value === null ? 'NULL' : (typeof value === 'object' ? JSON.stringify(value) : String(value));
      el.textContent = text.length > 300 ? text.slice(0, 299) + '…' : text;  // the whole value in the tooltip
      if (text.length > 40) { el.title = text.slice(0, 5000); }
      if (value === null) { el.className = 'muted'; }
      return el;
    };
    var run = function () {
      status.className = 'muted';
      status.textContent = 'running…';
      out.textContent = '';
      var started = performance.now();
      getJSON('/ui/api/sql', {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ sql: box.value })
      }).then(function (data) {
        var table = document.createElement('table');
        table.className = 'grid';
        var head = table.createTHead().insertRow();
        data.columns.forEach(function (c, i) {
          var th = cell('th', c), type = document.createElement('span');
          type.className = 'type muted';
          type.textContent = (data.types || [])[i] || '';
          th.appendChild(type);
          head.appendChild(th);
        });
        var body = table.createTBody();
        data.rows.forEach(function (row) {
          var tr = body.insertRow();
          row.forEach(function (v) { tr.appendChild(cell('td', v)); });
        });
        out.appendChild(table);
        status.textContent = (data.truncated ? 'the first ' + data.row_count + ' rows (the rest not fetched' +
          (data.max_bytes ? ': the result is larger than ' + Math.round(data.max_bytes / 1048576) + ' MB' : '') + ')'
          : data.row_count + ' row' + (data.row_count === 1 ? '' : 's')) + ' · ' +
          Math.round(performance.now() - started) + ' ms';
        // a long query stays out of the address: past 8 KB the server refuses the request line, so a reload fails
        var q = encodeURIComponent(box.value);
        history.replaceState(null, '', q.length <= MAX_ADDRESS_QUERY ? '/ui/sql?q=' + q : '/ui/sql');
        if (q.length > MAX_ADDRESS_QUERY) { status.textContent += ' · too long to keep in the address bar'; }
      }).catch(function (err) { status.className = 'error'; status.textContent = err.message; });
    };
    sqlForm.addEventListener('submit', function (event) { event.preventDefault(); run(); });
    box.addEventListener('keydown', function (event) {
      if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) { event.preventDefault(); run(); }
    });
    document.querySelectorAll('[data-table]').forEach(function (b) {
      b.addEventListener('click', function () {
        box.value = 'SELECT * FROM ' + b.getAttribute('data-table') + ' LIMIT 20';
        run();
      });
    });
    if (new URLSearchParams(location.search).get('q')) { run(); }
  }
})();
