// Force release behind the confirmation dialog, as a lock's page and a semaphore's page both
// offer it: the dialog (focus on Cancel, Escape closes it) and the line that tells how the
// release went, or why it was refused.

const $ = (id) => document.getElementById(id);

/**
 * Wires the dialog's buttons (until `signal` aborts, when the dialog is closed too) and
 * returns `ask(text, run)`: shows the dialog saying `text`, and on confirmation calls
 * `run()`, which resolves to what to say of the release, or rejects with an ApiError.
 * The outcome shows in `result`.
 */
export function releaser(signal, result) {
  const dialog = $("confirm");
  let confirmed = null;

  async function perform(run) {
    result.hidden = false;
    result.className = "result";
    result.textContent = "Force releasing…";
    try {
      const said = await run();
      result.classList.add("ok");
      result.textContent = said;
    } catch (error) {
      result.classList.add("refused");
      const hint = [401, 403].includes(error.status)
        ? " Force release needs the admin token: enter it above, then try again."
        : "";
      result.textContent = `Refused: ${error.describe()}.${hint}`;
    }
  }

  $("confirm-cancel").addEventListener("click", () => dialog.close(), { signal });
  $("confirm-ok").addEventListener(
    "click",
    () => {
      dialog.close();
      const run = confirmed;
      confirmed = null;
      if (run) {
        perform(run);
      }
    },
    { signal },
  );
  signal.addEventListener("abort", () => {
    if (dialog.open) {
      dialog.close();
    }
  });

  return function ask(text, run) {
    confirmed = run;
    $("confirm-text").textContent = text;
    dialog.showModal();
  };
}
