// loom's training/ for Python: learners and rates, the Trainer, fit and the progress printer. The
// package (learners.py, train.py, logging.py) gives them CNTK's signatures and units. Minibatches
// run with the GIL released; fit asks Python for each minibatch and for a pending signal (Ctrl-C)
// with it briefly held, between steps.
#include <sstream>

#include "bindings.hpp"

namespace loom_python {

using namespace loom;

namespace {

/// A learner as Python holds it: made (and checked) by its factory, then given to one Trainer,
/// which owns it from then on; the Python object keeps that Trainer alive and goes on reading it.
struct PyLearner {
    std::unique_ptr<Learner> owned;
    Learner* learner = nullptr;
    std::shared_ptr<Trainer> trainer;  ///< the Trainer that owns it, once given

    explicit PyLearner(std::unique_ptr<Learner> made) : owned(std::move(made)), learner(owned.get()) {}
};

std::vector<Parameter> parameters_of(const py::handle& list, const char* rule) {
    if (py::isinstance<Parameter>(list) || !py::isinstance<py::iterable>(list))
        throw UserError(std::string(rule) + ": parameters is a list of Parameters (model.parameters); got " +
                        std::string(py::str(py::repr(list))).substr(0, 100));
    std::vector<Parameter> out;
    for (py::handle item : list) {
        if (!py::isinstance<Parameter>(item))
            throw UserError(std::string(rule) + ": item " + std::to_string(out.size()) +
                            " of parameters is not a Parameter; got " +
                            std::string(py::str(py::repr(item))).substr(0, 100));
        out.push_back(item.cast<Parameter>());
    }
    return out;
}

LearnerOptions options_of(double l2, double clip, bool lazy_sparse_rows) {
    LearnerOptions o;
    o.l2_weight_decay = l2;
    o.gradient_clipping_norm = clip;
    o.lazy_sparse_rows = lazy_sparse_rows;
    return o;
}

/// A learner factory of learners.hpp as a Python function of (parameters, lr, its constants...,
/// l2, clip); `Make` receives the checked parameters and options.
template <class Make>
auto factory(const char* rule, Make make) {
    return [rule, make](const py::object& parameters, const LearningRate& lr, const py::args& constants, double l2,
                        double clip, bool lazy_sparse_rows) {
        std::vector<Parameter> params = parameters_of(parameters, rule);
        return std::make_shared<PyLearner>(
            make(std::move(params), lr, constants, options_of(l2, clip, lazy_sparse_rows)));
    };
}

double arg(const py::args& a, std::size_t i) { return a[i].cast<double>(); }

/// The inputs of a Trainer's loss and metric as Bindings.
Bindings trainer_bindings(const Trainer& t, const py::object& arguments, const char* caller) {
    std::vector<Variable> outputs{t.loss()};
    if (t.metric().node()) outputs.push_back(t.metric());
    return bindings_of(outputs, arguments, caller);
}

/// A ProgressPrinter that writes to Python's sys.stdout (what pytest's capsys and notebooks see)
/// through a string buffer, flushed after each call; never the live bar.
struct PyProgressPrinter {
    std::ostringstream buffer;
    ProgressOptions options;
    std::unique_ptr<ProgressPrinter> printer;

    explicit PyProgressPrinter(ProgressOptions o) : options(std::move(o)) {
        options.live = false;
        printer = std::make_unique<ProgressPrinter>(options, buffer);
    }
    void flush() {
        const std::string text = buffer.str();
        buffer.str({});
        if (text.empty()) return;
        py::object out = py::module_::import("sys").attr("stdout");
        out.attr("write")(text);
        out.attr("flush")();
    }
};

Checkpoint load(Trainer& t, const std::string& path) {
    py::gil_scoped_release released;
    return t.load_checkpoint(path);
}

py::dict extras_of(const Checkpoint& c) {
    py::dict out;
    for (const auto& [key, bytes] : c.extras) out[py::str(key)] = py::bytes(bytes);
    return out;
}

CheckpointExtras extras_from(const py::dict& given) {
    CheckpointExtras out;
    for (auto [key, value] : given) out[key.cast<std::string>()] = value.cast<std::string>();
    return out;
}

const char* stop_name(FitStop s) {
    switch (s) {
        case FitStop::epochs:
            return "epochs";
        case FitStop::early:
            return "early";
        case FitStop::max_steps:
            return "max_steps";
        case FitStop::max_seconds:
            return "max_seconds";
        case FitStop::interrupted:
            return "interrupted";
    }
    return "epochs";
}

/// fit over a Python source: `minibatch(epoch, index)` gives a dict of data. The GIL is released
/// while fit runs and taken back for the source, the evaluation, the printer and, before each step,
/// for the signals (Ctrl-C): a pending KeyboardInterrupt stops fit (its checkpoint saved whole) and
/// is raised once fit returns.
py::dict fit_from_python(Trainer& t, const py::object& minibatch, std::size_t per_epoch, std::uint64_t samples,
                         FitOptions o, const py::object& evaluate, PyProgressPrinter* printer) {
    if (!PyCallable_Check(minibatch.ptr()))
        throw UserError("fit: the source is a function of (epoch, index) giving {input: data}; got " +
                        std::string(py::str(py::repr(minibatch))).substr(0, 100));
    std::unique_ptr<py::error_already_set> pending;  // a Python error met inside fit, raised after it
    EpochSource source{per_epoch, nullptr, samples};
    source.minibatch = [&](std::size_t epoch, std::size_t index) {
        py::gil_scoped_acquire held;
        return trainer_bindings(t, minibatch(epoch, index), "fit");
    };
    o.stop_requested = [&] {
        py::gil_scoped_acquire held;
        if (printer) printer->flush();
        if (PyErr_CheckSignals() != 0) pending = std::make_unique<py::error_already_set>();
        return pending != nullptr;
    };
    if (printer) {
        o.progress_stream = &printer->buffer;
        o.progress = printer->options;
    }
    std::function<Evaluation()> score;
    if (!evaluate.is_none())
        score = [&evaluate] {
            py::gil_scoped_acquire held;
            const py::object given = evaluate();
            // (score, text): the text is what fit prints for the evaluation.
            const bool with_text = py::isinstance<py::tuple>(given) && py::len(given) == 2 &&
                                   py::isinstance<py::str>(given.cast<py::tuple>()[1]);
            const py::object score_given = with_text ? py::object(given.cast<py::tuple>()[0]) : given;
            if (!py::hasattr(score_given, "__float__"))
                throw UserError("fit: evaluate returns a number (higher is better) or (number, text); got " +
                                std::string(py::str(py::repr(given))).substr(0, 100));
            return Evaluation(py::float_(score_given).cast<double>(),
                              with_text ? given.cast<py::tuple>()[1].cast<std::string>() : std::string());
        };
    FitResult r;
    {
        py::gil_scoped_release released;
        r = loom::fit(t, source, o, score);
    }
    if (printer) printer->flush();
    if (pending) throw std::move(*pending);
    py::list evaluations;
    for (const FitEvaluation& e : r.evaluations)
        evaluations.append(py::dict(py::arg("step") = e.step, py::arg("epoch") = e.epoch, py::arg("score") = e.score,
                                    py::arg("train_loss") = e.train_loss, py::arg("improved") = e.improved));
    return py::dict(py::arg("steps") = r.steps, py::arg("epochs") = r.epochs, py::arg("epoch_losses") = r.epoch_losses,
                    py::arg("evaluations") = evaluations, py::arg("best") = r.best,
                    py::arg("stopped") = stop_name(r.stopped), py::arg("resumed") = r.resumed);
}

}  // namespace

void bind_training(py::module_& m) {
    py::class_<LearningRate>(m, "LearningRate",
                             R"doc(A learning rate as a function of the number of updates already applied (from 0):
rate(step). A number converts to a constant rate. loom's own schedules (warmup_cosine_decay, ...)
are LearningRates; CNTK's learning_parameter_schedule is indexed by samples (loom.learners).)doc")
        .def(py::init<double>(), py::arg("constant"))
        .def(py::init([](const py::function& f) {
                 return LearningRate([f](std::uint64_t step) {
                     py::gil_scoped_acquire held;
                     return f(step).cast<double>();
                 });
             }),
             py::arg("schedule"), "A rate from a Python function of the step (called with the GIL, once per update).")
        .def("__call__", &LearningRate::operator(), py::arg("step"), "The rate of update number step (from 0).");
    py::implicitly_convertible<double, LearningRate>();
    py::implicitly_convertible<int, LearningRate>();

    m.def("constant_rate", &constant_rate, py::arg("lr"), "lr at every update.");
    m.def("step_decay", &step_decay, py::arg("lr"), py::arg("step_size"), py::arg("gamma"),
          "lr * gamma ** (step // step_size).");
    m.def("exponential_decay", &exponential_decay, py::arg("lr"), py::arg("gamma"), "lr * gamma ** step.");
    m.def("warmup_linear_decay", &warmup_linear_decay, py::arg("peak"), py::arg("warmup_steps"), py::arg("total_steps"),
          py::arg("final_lr") = 0.0,
          "Linear warm-up to peak over warmup_steps updates (peak * (s + 1) / warmup_steps), then linear decay to "
          "final_lr at total_steps, final_lr after.");
    m.def("warmup_cosine_decay", &warmup_cosine_decay, py::arg("peak"), py::arg("warmup_steps"), py::arg("total_steps"),
          py::arg("final_lr") = 0.0,
          "Linear warm-up as warmup_linear_decay's, then a half cosine from peak to final_lr at total_steps "
          "(final_lr + (peak - final_lr) * (1 + cos(pi f)) / 2, f = (s - warmup) / (total - warmup)).");

    py::class_<PyLearner, std::shared_ptr<PyLearner>>(m, "_Learner", "A learner of training/learners.hpp.")
        .def_property_readonly("name", [](const PyLearner& l) { return l.learner->name(); })
        .def_property_readonly("parameters",
                               [](const PyLearner& l) {
                                   py::list out;
                                   for (const Parameter& p : l.learner->parameters()) out.append(wrap(p));
                                   return out;
                               })
        .def_property_readonly("step_count", [](const PyLearner& l) { return l.learner->step_count(); })
        .def("learning_rate", [](const PyLearner& l) { return l.learner->learning_rate(); })
        .def(
            "set_learning_rate", [](PyLearner& l, const LearningRate& lr) { l.learner->set_learning_rate(lr); },
            py::arg("lr"))
        .def_property_readonly("last_gradient_norm",
                               [](const PyLearner& l) { return l.learner->last_gradient_norm(); });

    const auto bind_rule = [&m](const char* name, auto make) {
        m.def(name, factory(name, make), py::arg("parameters"), py::arg("lr"), py::arg("l2") = 0.0,
              py::arg("clip") = 0.0, py::arg("lazy_sparse_rows") = false);
    };
    // The rule's constants come positionally after lr (learners.py names them).
    bind_rule("_sgd", [](std::vector<Parameter> p, const LearningRate& lr, const py::args&, LearnerOptions o) {
        return sgd(std::move(p), lr, o);
    });
    bind_rule("_momentum_sgd", [](std::vector<Parameter> p, const LearningRate& lr, const py::args& a,
                                  LearnerOptions o) { return momentum_sgd(std::move(p), lr, arg(a, 0), o); });
    bind_rule("_nesterov", [](std::vector<Parameter> p, const LearningRate& lr, const py::args& a, LearnerOptions o) {
        return nesterov(std::move(p), lr, arg(a, 0), o);
    });
    bind_rule("_adagrad", [](std::vector<Parameter> p, const LearningRate& lr, const py::args& a, LearnerOptions o) {
        return adagrad(std::move(p), lr, arg(a, 0), o);
    });
    bind_rule("_rmsprop", [](std::vector<Parameter> p, const LearningRate& lr, const py::args& a, LearnerOptions o) {
        return rmsprop(std::move(p), lr, arg(a, 0), arg(a, 1), o);
    });
    bind_rule("_adam", [](std::vector<Parameter> p, const LearningRate& lr, const py::args& a, LearnerOptions o) {
        return adam(std::move(p), lr, arg(a, 0), arg(a, 1), arg(a, 2), o);
    });
    bind_rule("_adamw", [](std::vector<Parameter> p, const LearningRate& lr, const py::args& a, LearnerOptions o) {
        o.decay_matrices_only = a.size() > 4 && a[4].cast<bool>();
        return adamw(std::move(p), lr, arg(a, 0), arg(a, 1), arg(a, 2), arg(a, 3), o);
    });
    bind_rule("_adadelta", [](std::vector<Parameter> p, const LearningRate& lr, const py::args& a, LearnerOptions o) {
        return adadelta(std::move(p), lr, arg(a, 0), arg(a, 1), o);
    });
    bind_rule("_fsadagrad", [](std::vector<Parameter> p, const LearningRate& lr, const py::args& a, LearnerOptions o) {
        return fsadagrad(std::move(p), lr, arg(a, 0), arg(a, 1), a[2].cast<bool>(), o);
    });

    py::class_<MinibatchResult>(m, "MinibatchResult", "What one minibatch gave: sums over its items and their counts.")
        .def_readonly("loss_sum", &MinibatchResult::loss_sum)
        .def_readonly("loss_count", &MinibatchResult::loss_count)
        .def_readonly("metric_sum", &MinibatchResult::metric_sum)
        .def_readonly("metric_count", &MinibatchResult::metric_count)
        .def_readonly("skipped_updates", &MinibatchResult::skipped_updates)
        .def_property_readonly("average_loss", &MinibatchResult::average_loss)
        .def_property_readonly("average_metric", &MinibatchResult::average_metric);

    py::class_<PyProgressPrinter>(m, "_ProgressPrinter", "training/progress.hpp's printer, writing to sys.stdout.")
        .def(py::init([](std::size_t every, const std::string& tag, std::size_t epochs, std::uint64_t epoch_size) {
                 ProgressOptions o;
                 o.print_every_n_minibatches = every, o.tag = tag, o.num_epochs = epochs, o.epoch_size = epoch_size;
                 return std::make_unique<PyProgressPrinter>(o);
             }),
             py::arg("every"), py::arg("tag"), py::arg("num_epochs"), py::arg("epoch_size"))
        .def("update",
             [](PyProgressPrinter& p, const MinibatchResult& r) {
                 p.printer->update(r);
                 p.flush();
             })
        .def("end_epoch",
             [](PyProgressPrinter& p) {
                 MinibatchResult r = p.printer->end_epoch();
                 p.flush();
                 return r;
             })
        .def("note", [](PyProgressPrinter& p, const std::string& line) {
            p.printer->note(line);
            p.flush();
        });

    py::class_<Trainer, std::shared_ptr<Trainer>>(m, "_Trainer", "training/trainer.hpp's Trainer.")
        .def(py::init([](const Variable& loss, const py::object& metric, PyLearner& learner, bool average) {
                 if (!learner.owned)
                     throw UserError("Trainer: this learner (" + learner.learner->name() +
                                     ") already trains another Trainer; make a learner for each");
                 TrainerOptions o;
                 o.average_gradients = average;
                 const Variable measured = metric.is_none() ? Variable() : metric.cast<Variable>();
                 auto t = std::make_shared<Trainer>(loss, measured, std::move(learner.owned), o);
                 learner.trainer = t;
                 return t;
             }),
             py::arg("loss"), py::arg("metric"), py::arg("learner"), py::arg("average_gradients"))
        .def(
            "train_minibatch",
            [](Trainer& t, const py::object& arguments) {
                const Bindings b = trainer_bindings(t, arguments, "train_minibatch");
                py::gil_scoped_release released;
                return t.train_minibatch(b);
            },
            py::arg("arguments"))
        .def(
            "test_minibatch",
            [](Trainer& t, const py::object& arguments) {
                const Bindings b = trainer_bindings(t, arguments, "test_minibatch");
                py::gil_scoped_release released;
                return t.test_minibatch(b);
            },
            py::arg("arguments"))
        .def_property_readonly("total_samples_seen", &Trainer::total_samples_seen)
        .def_property_readonly("skipped_updates", &Trainer::skipped_updates)
        .def(
            "save_checkpoint",
            [](const Trainer& t, const std::string& path, const py::dict& extras) {
                const CheckpointExtras e = extras_from(extras);
                py::gil_scoped_release released;
                t.save_checkpoint(path, {}, e);
            },
            py::arg("path"), py::arg("extras"))
        .def(
            "load_checkpoint", [](Trainer& t, const std::string& path) { return extras_of(load(t, path)); },
            py::arg("path"))
        .def(
            "fit",
            [](Trainer& t, const py::object& minibatch, std::size_t per_epoch, std::uint64_t samples,
               std::size_t epochs, const std::string& checkpoint, std::size_t checkpoint_every, std::size_t max_steps,
               const py::object& evaluate, std::size_t evaluate_every, std::size_t patience, PyProgressPrinter* printer,
               bool restore_best) {
                FitOptions o;
                o.max_epochs = epochs, o.checkpoint_path = checkpoint, o.checkpoint_every = checkpoint_every;
                o.max_steps = max_steps, o.evaluate_every = evaluate_every, o.patience = patience;
                o.restore_best = restore_best;
                return fit_from_python(t, minibatch, per_epoch, samples, o, evaluate, printer);
            },
            py::arg("minibatch"), py::arg("minibatches_per_epoch"), py::arg("samples_per_epoch"), py::arg("epochs"),
            py::arg("checkpoint"), py::arg("checkpoint_every"), py::arg("max_steps"), py::arg("evaluate"),
            py::arg("evaluate_every"), py::arg("patience"), py::arg("printer"), py::arg("restore_best") = true);
}

}  // namespace loom_python
