// Dossier workbench: progressive enhancement only. Every page works without this file.
"use strict";

// A live run's page fetches itself every few seconds and replaces only the regions (`data-live`) whose
// content changed: the reader's place, focus and scroll stay; a region being edited is left alone.
function liveRegions() {
  var seconds = Number(document.body.dataset.refresh || 0);
  if (!seconds) return;
  function editing(region) {
    var active = document.activeElement;
    if (active && region.contains(active) && /^(TEXTAREA|INPUT|SELECT)$/.test(active.tagName)) return true;
    var fields = region.querySelectorAll("textarea, input[type=text], input:not([type])");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value !== fields[i].defaultValue) return true;
    }
    return false;
  }
  function statusText(doc) {
    var status = doc.getElementById("run-status");
    return status ? status.textContent : "";
  }
  function update() {
    var url = window.location.pathname + window.location.search.replace(/([?&])notice=[^&]*&?/, "$1");
    fetch(url, { credentials: "same-origin", headers: { accept: "text/html" } })
      .then(function (response) {
        if (!response.ok || response.redirected) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        var next = new DOMParser().parseFromString(html, "text/html");
        var before = statusText(document);
        var regions = document.querySelectorAll("[data-live]");
        for (var i = 0; i < regions.length; i++) {
          var fresh = next.getElementById(regions[i].id);
          if (!fresh || fresh.innerHTML === regions[i].innerHTML || editing(regions[i])) continue;
          regions[i].innerHTML = fresh.innerHTML;
        }
        var after = statusText(document);
        var note = document.getElementById("live-note");
        if (note && after !== before) note.textContent = "The run is now " + after + ".";
        if (next.body.dataset.refresh) window.setTimeout(update, seconds * 1000);
        else delete document.body.dataset.refresh;
      })
      .catch(function () {
        window.setTimeout(update, seconds * 3000);
      });
  }
  window.setTimeout(update, seconds * 1000);
}

// The refusal's own words: the error page's alert, or the API envelope's message (a body over the limit).
function failure(xhr) {
  if ((xhr.getResponseHeader("content-type") || "").indexOf("application/json") === 0) {
    try {
      return JSON.parse(xhr.responseText).error.message;
    } catch (ignored) {
      return "The upload failed (HTTP " + xhr.status + ").";
    }
  }
  var page = new DOMParser().parseFromString(xhr.responseText, "text/html");
  var alert = page.querySelector("[role=alert]");
  return alert ? alert.textContent.trim().replace(/\s+/g, " ") : "The upload failed (HTTP " + xhr.status + ").";
}

// Uploads go through XHR so the progress bar moves; the server's answer (a redirect) is then followed.
function uploadWithProgress(form) {
  var bar = form.querySelector("progress");
  var status = form.querySelector(".upload-status");
  var button = form.querySelector("button[type=submit]");
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var xhr = new XMLHttpRequest();
    xhr.open("POST", form.action);
    xhr.upload.addEventListener("progress", function (e) {
      if (!e.lengthComputable) return;
      var percent = Math.round((e.loaded / e.total) * 100);
      bar.value = percent;
      bar.textContent = percent + "%";
      status.textContent = percent < 100 ? "Uploading: " + percent + "%" : "Uploaded; extracting the text…";
    });
    xhr.addEventListener("load", function () {
      if (xhr.status >= 200 && xhr.status < 300) {
        window.location.assign(xhr.responseURL);
        return;
      }
      status.textContent = failure(xhr);
      button.disabled = false;
    });
    xhr.addEventListener("error", function () {
      status.textContent = "The upload failed: the connection was lost.";
      button.disabled = false;
    });
    button.disabled = true;
    status.textContent = "Uploading…";
    xhr.send(new FormData(form));
  });
}

// The history picker filters and pages by GET: the question typed and the versions ticked go along.
function carryDraft(form) {
  var source = document.getElementById(form.dataset.carry);
  if (!source) return;
  form.addEventListener("submit", function () {
    var old = form.querySelectorAll("input[data-carried]");
    for (var i = 0; i < old.length; i++) old[i].remove();
    function add(name, value) {
      var input = document.createElement("input");
      input.type = "hidden";
      input.name = name;
      input.value = value;
      input.dataset.carried = "1";
      form.appendChild(input);
    }
    var question = source.querySelector("[name=question]");
    if (question && question.value) add("question", question.value);
    var ticked = source.querySelectorAll("input[name=history]:checked");
    for (var j = 0; j < ticked.length; j++) add("picked", ticked[j].value);
  });
}

document.addEventListener("DOMContentLoaded", function () {
  liveRegions();
  var carriers = document.querySelectorAll("form[data-carry]");
  for (var k = 0; k < carriers.length; k++) carryDraft(carriers[k]);
  var forms = document.querySelectorAll("form[data-upload]");
  for (var i = 0; i < forms.length; i++) uploadWithProgress(forms[i]);
});
