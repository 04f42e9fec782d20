//! An analysis kept by `herd analyze` reads back as the same typed rows (every table, through
//! Parquet), and a kept analysis answers only for the trials it was computed from.

use std::path::Path;

use herd_analysis::rows::{
    AucDelta, BootstrapEstimate, CurveAuc, CurvePoint, DifficultyFit, DifficultyRho, GeeTerm, RobustnessCheck,
    SeedTest, TableRow,
};
use herd_analysis::stored::{AnalysisSettings, Stored, Study, read_stored, write_stored};
use herd_analysis::study::{TrialSource, read_conformity, read_minimal_group};
use herd_analysis::{
    BootstrapPlan, ConformityOptions, ConformityTables, MinimalGroupOptions, MinimalGroupTables, analyze_conformity,
    analyze_minimal_group,
};

fn data(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// Rows compared by their Debug text: an undefined statistic is NaN, which `==` never equals, and
/// Debug prints every f64 exactly (shortest round-trip form).
fn same<T: std::fmt::Debug>(a: &[T], b: &[T]) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

fn read_back(dir: &Path, study: Study, input: &str, pool: Option<f64>) -> Vec<herd_analysis::ResultTable> {
    match read_stored(dir, study, input, pool).unwrap() {
        Stored::Current(tables, _) => tables,
        other => panic!("expected the kept analysis, got {other:?}"),
    }
}

#[test]
fn conformity_tables_read_back_as_the_same_typed_rows() {
    let input = read_conformity(TrialSource::file(data("conformity_trials.csv")), Default::default()).unwrap();
    let tables = analyze_conformity(&input.trials, &ConformityOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_stored(dir.path(), Study::Conformity, &input.digest, &AnalysisSettings::default(), &tables.all()).unwrap();
    let back =
        ConformityTables::from_tables(read_back(dir.path(), Study::Conformity, &input.digest, None), "kept").unwrap();
    assert_eq!(back, tables);
    assert!(!tables.curve_points().is_empty() && !tables.difficulty_fits().is_empty(), "the data exercise every table");
    assert!(same(&back.curve_points(), &CurvePoint::all(&tables.curves)));
    assert!(same(&back.curve_aucs(), &CurveAuc::all(&tables.auc)));
    assert!(same(&back.auc_deltas(), &AucDelta::all(&tables.deltas)));
    assert!(same(&back.difficulty_rhos(), &DifficultyRho::all(&tables.difficulty_spearman)));
    assert!(same(&back.difficulty_fits(), &DifficultyFit::all(&tables.difficulty_ols)));
    // A typed row carries what the table says: the first curve point's N and mean.
    let first = &tables.curve_points()[0];
    assert_eq!(first.n, tables.curves.number("n", 0).map(|n| n as i64));
    assert_eq!(first.mean, tables.curves.number("mean", 0).unwrap());

    // Another input digest, another herd's record or an edited table: never read as current.
    assert!(matches!(
        read_stored(dir.path(), Study::Conformity, "sha256:other", None).unwrap(),
        Stored::Stale(why) if why.contains("other trials")
    ));
    assert!(matches!(
        read_stored(dir.path(), Study::MinimalGroup, &input.digest, None).unwrap(),
        Stored::Stale(why) if why.contains("conformity analysis")
    ));
    std::fs::write(dir.path().join("auc.parquet"), b"PAR1 edited").unwrap();
    assert!(matches!(
        read_stored(dir.path(), Study::Conformity, &input.digest, None).unwrap(),
        Stored::Stale(why) if why.contains("auc.parquet changed after it was written")
    ));
    assert!(matches!(read_stored(&dir.path().join("none"), Study::Conformity, "x", None).unwrap(), Stored::Missing));
}

#[test]
fn minimal_group_tables_read_back_as_the_same_typed_rows() {
    let input = read_minimal_group(TrialSource::file(data("dyads.csv")), Default::default()).unwrap();
    let options = MinimalGroupOptions {
        bootstrap: BootstrapPlan::Seeded { resamples: 50, seed: 3 },
        ..MinimalGroupOptions::default()
    };
    let tables = analyze_minimal_group(&input.dyads, &options).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let settings = AnalysisSettings::of_minimal_group(&options);
    write_stored(dir.path(), Study::MinimalGroup, &input.digest, &settings, &tables.all()).unwrap();
    let kept = read_back(dir.path(), Study::MinimalGroup, &input.digest, Some(options.pool));
    let back = MinimalGroupTables::from_tables(kept, "kept").unwrap();
    assert_eq!(back, tables);
    assert!(same(&back.seed_test_rows(), &SeedTest::all(&tables.seed_tests)));
    assert!(same(&back.gee_terms(), &GeeTerm::all(&tables.gee)));
    assert!(same(&back.bootstrap_estimates(), &BootstrapEstimate::all(&tables.bootstrap)));
    assert!(same(&back.robustness_checks(), &RobustnessCheck::all(&tables.robustness)));
    // The design columns the input has are read; the GEE fits were not bootstrapped.
    let seed = tables.seed_test_rows();
    assert!(seed.iter().all(|t| t.model.is_some()), "dyads.csv has a model column");
    assert!(tables.gee_terms().iter().all(|g| g.se_bootstrap.is_none()));
    // Another pool is another analysis.
    assert!(matches!(
        read_stored(dir.path(), Study::MinimalGroup, &input.digest, Some(50.0)).unwrap(),
        Stored::Stale(why) if why.contains("pool")
    ));
}
