pub mod build;
pub mod check;
pub mod tool;
